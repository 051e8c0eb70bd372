"""What the manifest says of the Codex mapping (export_report.codex): usage selection, coverage."""

from __future__ import annotations

USAGE_SELECTION = (
    "Where a rollout has token_usage_record lines (Codex 0.151 and later), each distinct response_id is one "
    "response (its inference_id), counted once across every file, its usage the record's usage (never the "
    "running sums turn_token_usage and thread_token_usage, nor a compacted line's latest_token_usage_record, "
    "an embedded copy); the token_count lines from the turn of a file's first record on give no response "
    "(codex-format.md §14.4). Elsewhere (files without records, and the part of a file written before its "
    "records began) Codex writes no response ID and re-emits its usage: each distinct pair of cumulative and "
    "last usage (the five classic fields of token_count info.total_token_usage and info.last_token_usage) is "
    "one response, counted once across every file (§9.6); its last_token_usage is the response's usage. "
    "Events with info null, an empty total or last, or a last with input and output both 0 (post-compaction "
    "estimates) are not responses, nor is a record whose usage has input and output both 0. "
    "input_total_tokens includes cached input (input_includes_cache true); output_total_tokens includes "
    "reasoning. A copy in a fork or subagent file is attributed to the parent stream. Remote compaction "
    "and providers that report no usage are not in the rollout, so not counted."
)
# Versions of the real rollouts the test suite converts (tests/fixtures/codex)
REAL_EVIDENCE_VERSIONS = ("0.58.0", "0.104.0-alpha.1")
COVERAGE = {
    "policy": "no registry entry for Codex: each fact is mapped as the Claude Code entry maps the same fact "
              "(docs/asr-tables.md, Codex rollouts; docs/coverage.md, Codex rollouts)",
    "real_evidence_versions": list(REAL_EVIDENCE_VERSIONS),
    "unqualified_items": ["fork and subagent files", "resume", "context-window-full events",
                          "token_usage_record lines, history_base references, thread/revert rollouts and "
                          "migrated rollouts (authored from the reference, no real file)",
                          "legacy pre-0.32 rollouts", "TypeScript CLI .json rollouts (not read)",
                          "exit codes of plain-text tool outputs and of exec_command_end events", "turn_aborted",
                          "paginated threads (history_mode paginated, item_completed items, ordinal, inherited "
                          "subagent context) and the line kinds of 0.13x and later: authored fixtures only"],
}


def export_report(versions: list[str]) -> dict:
    """The manifest's export_report.codex, for a run that read Codex rollouts of `versions`."""
    return {"usage_selection": USAGE_SELECTION, "coverage": {**COVERAGE, "versions_in_input": versions}}
