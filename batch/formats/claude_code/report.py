"""What the manifest says of the Claude Code format: the usage selection, the coverage of the
registry entry's items with their evidence, the retention policy and the facts without an owner."""

from __future__ import annotations

USAGE_SELECTION = (
    "One usage report per inference (assistant message.id) in the whole output. Within a stream, "
    "usage and stop reason come from the latest native observation of the response. Across streams "
    "(resume and fork copies), the observation with a stop reason is selected first, then the largest "
    "output count, then the smallest session_key and position. Every observation is kept in "
    "inference_observations. Synthetic API-error lines are not inferences. Usage is never read from "
    "toolUseResult.usage, nor from agent_progress copies of a subagent whose transcript is present; a "
    "subagent rebuilt from those copies (its transcript absent) says so in usage_source. Missing fields "
    "are null, never 0."
)
# Versions of the real transcripts the test suite converts (tests/fixtures/corpus).
REAL_EVIDENCE_VERSIONS = (
    "1.0.17", "1.0.24", "1.0.29", "1.0.51", "1.0.55", "1.0.56", "1.0.98", "1.0.108", "1.0.128",
    "2.0.0", "2.0.28", "2.0.31", "2.0.37", "2.0.42", "2.0.44", "2.0.55", "2.0.58", "2.0.76",
    "2.1.3", "2.1.6", "2.1.9", "2.1.17", "2.1.20", "2.1.38", "2.1.39", "2.1.42", "2.1.114",
    "2.1.158", "2.1.179", "2.1.181", "2.1.183", "2.1.185", "2.1.199",
)
# Registry items and the real versions whose transcripts back them with value-asserting tests
# (docs/coverage.md names each test). The entry states its contracts for 2.1.219-2.1.305: no real
# transcript of those versions is in the corpus, so every item is qualified only for the versions named.
REAL_EVIDENCE_BY_ITEM = {
    "main and subagent streams, session IDs": "1.0.17-2.1.199",
    "inline 1.0.x sidechains (lineage content_match)": "1.0.108",
    "entity keys; turnId = promptId": "1.0.17-2.1.199 (turnId 2.1.158-2.1.199)",
    "fold by message.id; usage and stop reason from the latest observation": "1.0.17-2.1.199",
    "origin.kind human, promptSource": "2.1.179-2.1.185",
    "queued_command of a person (steer); isMeta and attachments injected": "2.1.114-2.1.199",
    "task-notification (trigger task_completion)": "2.1.183",
    "command markers, local-command output": "2.0.0",
    "repeated metadata on change only; permission-mode with prompts' permissionMode": "2.1.114-2.1.199",
    "ai-title (titleSource model)": "2.1.158-2.1.185",
    "mode entry": "2.1.158-2.1.199",
    "last-prompt and the active leaf": "2.1.158-2.1.199",
    "pr-link": "2.1.183",
    "gitOperation (commit, push, pr created)": "2.1.181-2.1.199",
    "structured attachments as data parts": "2.1.114-2.1.199",
    "spawnedBy from the parent result agentId alone (native_field_partial)": "2.1.114",
    "background Bash terminals; exit code from an output read": "2.0.42-2.1.158",
    "TaskStop stops a background task": "2.1.158",
    "MCP tool names (provider mcp, server); attributionMcpServer/Tool on the inference": "2.1.158-2.1.181",
    "hooks (hook_success, stop_hook_summary, hook_additional_context)": "2.0.58-2.1.114",
    "compaction with its summary; logicalParentUuid": "2.0.76-2.1.185",
    "file-history-snapshot checkpoints": "2.0.58-2.1.199",
    "AskUserQuestion answers as selected labels": "2.1.38",
    "TodoWrite, Task tools, ExitPlanMode plans": "1.0.17-2.1.114",
    "deferred_tools_delta tool definitions": "2.1.114",
    "queue-operation remove withdraws": "2.0.42-2.1.39",
    "synthetic API errors are failed attempts": "2.1.6-2.1.9",
    "a person's rejection or cancellation written as the result's text (a denial, evidence text_marker)": "1.0.17-2.1.185",
}
# Items of the entry that no real transcript in the corpus shows: covered by authored fixtures only.
UNQUALIFIED_ITEMS = (
    "turnOrigin", "scheduledTaskId, scheduledFireId, fireReason", "permissionDecision", "toolDenialKind",
    "api-request and requestDigest", "cost-state", "environment attachment", "memory_saved and memdirStamped",
    "custom-title", "forkedFrom, fork-context-ref, continued-in", "origin.kind peer, coordinator, observer, channel",
    "file-history-delta", "bridge-session", "sidecar toolUseId (spawnedBy native_field, launch prompt author agent)",
    "Monitor, background Agent",
)
COVERAGE = {
    "format": "claude-code-jsonl",
    "policy": (
        "Fields decoded into columns are listed per registry item in docs/coverage.md with the test that "
        "shows each. Every other field is kept verbatim, once (records.native, source_lines.native; parts name their block by native_path). "
        "An item is qualified for a version only by a real transcript of that version; items shown only by "
        "authored fixtures are covered but unqualified. Covering an event is not covering every field of its payload. "
        "The registry entry states its contracts for 2.1.219-2.1.305; the real transcripts converted by the tests "
        "are 1.0.17-2.1.199, so no item is qualified for the entry's versions."
    ),
    "real_evidence_versions": list(REAL_EVIDENCE_VERSIONS),
    "real_evidence_by_item": REAL_EVIDENCE_BY_ITEM,
    "unqualified_items": list(UNQUALIFIED_ITEMS),
}
RETENTION = (
    "Claude Code deletes transcripts after 30 days by default and may delete tool-results/ files under its "
    "retention policy; a bundle manifest that knows of a deletion records it as deleted_by_retention. A transcript "
    "archive holds no record of a deletion: a referenced file that is absent may have been deleted by retention, "
    "removed by hand or never copied. So deleted_by_retention is never claimed: each referenced file the archive "
    "lacks (a tool-results/ file a persisted output points to, a subagent transcript a parent's result or progress "
    "line names) is listed under absent_files with status absent and its possible causes, and its loss is declared "
    "(tool_output_truncated, subagent_transcript_absent, lineage). Sessions whose transcripts are gone leave no trace "
    "in an archive and cannot be listed."
)
UNASSIGNED = (
    "Facts without established session ownership are listed in _meta['com.anthropic.claude-code/unassigned'] "
    "and nowhere else: summary lines whose leafUuid is not a record of the stream holding them (a summary can "
    "describe another session's leaf). All such facts of the converted inputs are kept, whichever sessions "
    "were selected; their position in the file is evidence of where they were written, not of ownership."
)
