"""Tables of the conversion core: streams, records, parts, usage, tools, lineage, accounting."""

from __future__ import annotations

import pyarrow as pa

from batch.schema.base import BOOL, I64, JSON, STR, STRS, TS, Table
from batch.schema.base import col as _c

POSITION_DOC = (
    "position in the native transcript (ASR-014): `line:N` for physical line N, "
    "`line:N#k` for the k-th object recovered from a line holding several; `events:line:N` for line N "
    "of an Entire lifecycle events file; `rollout:<rollout id>:line:N` for line N of a Codex thread's later "
    "rollout (thread/revert)"
)

SESSIONS = Table(
    "sessions",
    "one row per stream (a main session, a subagent, or an inline sidechain)",
    "Streams and what the transcript says about them.",
    (
        _c("session_key", STR, "stream key, unique in the output: the sessionId for a main session, "
           "`<parent sessionId>/<agentId>` for a subagent, `<sessionId>/sidechain-<root uuid>` for an inline 1.0.x sidechain"),
        _c("session_id", STR, "ASR session ID: the records' sessionId for a main session, the agentId for a subagent"),
        _c("stream_kind", STR, "main, subagent, or sidechain (inline isSidechain turns of 1.0.x)"),
        _c("parent_session_key", STR, "session_key of the stream this one belongs to (subagents and sidechains): the "
           "stream that spawned it (lineage spawned_by), else the session its transcript names, in the output or not; "
           "null for a main session, a fork's included (a root is never claimed from one transcript); never the stream itself"),
        _c("root_session_key", STR, "the stream at the top of this one's tree: parent_session_key followed up to a stream "
           "without a parent (a main session, a fork's included), or to a parent that is not in the output; the stream "
           "itself for a main session. Subagents and spawned threads roll up to it (docs/asr-tables.md, \"Roots\")"),
        _c("parent_session_id", STR, "native sessionId carried by a subagent's records (its parent's)"),
        _c("agent_id", STR, "native agentId of a subagent"),
        _c("agent", STR, "agent that wrote the transcript: claude-code, codex (a Codex CLI rollout); for an Entire session without a Claude Code "
           "transcript, the agent Entire names (codex, gemini-cli, ...)"),
        _c("producer_method", STR, "how the records were produced: converter, or import (Entire Transcript Format, "
           "or a session known only from Entire lifecycle events); "
           "null for an Entire session with no usable transcript"),
        _c("producer_source", STR, "native format converted: claude-code-jsonl, codex-rollout-jsonl, entire-transcript, or "
           "entire-agent-events (a session known only from lifecycle events)"),
        _c("content_level", STR, "full for native transcripts; redacted for Entire checkpoints"),
        _c("started_at", TS, "earliest record timestamp of the stream (UTC); the timestamp of an Entire "
           "SessionStart event when one names the session"),
        _c("ended_at", TS, "latest record timestamp of the stream (UTC)"),
        _c("cwd", STR, "first working directory recorded"),
        _c("cwds", STRS, "every distinct working directory, in first-seen order"),
        _c("git_branch", STR, "first non-empty git branch recorded"),
        _c("versions", STRS, "every Claude Code version that wrote lines of the stream, in first-seen order; for Codex the first "
           "session_meta's cli_version"),
        _c("title", STR, "latest title: custom-title beats ai-title beats the newest summary line of the file"),
        _c("title_source", STR, "user (custom-title), model (ai-title) or summary"),
        _c("first_prompt", STR, "the first prompt of the stream, whitespace collapsed, cut at 200 characters: for a main "
           "session the first message a person wrote in it (a fork's own, not its copy of its parent's); for a subagent, "
           "sidechain or spawned thread the instruction it was launched with, written by its parent agent; for a session "
           "of slash commands only, its first command as typed; null without one (docs/asr-tables.md, \"First prompts\")"),
        _c("first_prompt_record_id", STR, "the record first_prompt is read from"),
        _c("agent_type", STR, "subagent type from the sidecar .meta.json (agentType)"),
        _c("description", STR, "subagent description from the sidecar .meta.json"),
        _c("is_async", BOOL, "for a subagent: launched in the background (Agent with run_in_background), see background_tasks; null for other streams"),
        _c("source_files", STRS, "input files holding the stream (Entire lifecycle events files after the transcripts)"),
        _c("rebuilt_from", STR, "agent_progress when the subagent transcript is absent and the stream was rebuilt "
           "from the copies its parent's progress lines embed; else null"),
        _c("client_name", STR, "client that wrote the stream: the first entrypoint (cli, sdk-cli, ...); for Codex the "
           "session_meta originator (codex_cli_rs, codex_exec, Codex Desktop, ...)"),
        _c("active_leaf_uuid", STR, "active leaf: leafUuid of the latest last-prompt line"),
        _c("active_leaf_record_id", STR, "record holding the active leaf, when it is in this stream"),
        _c("forked_from_session_id", STR, "session the records were copied from (forkedFrom.sessionId); see lineage"),
        _c("inherits_mode", STR, "referenced when a fork-context-ref line (Claude Code) or a fork's session_meta "
           "history_base (Codex) says the parent's prefix is referenced, not copied"),
        _c("inherits_session_id", STR, "fork-context-ref parentSessionId; for Codex the parent thread (forked_from_id)"),
        _c("inherits_last_uuid", STR, "fork-context-ref parentLastUuid: the last inherited record"),
        _c("continued_in_session_id", STR, "continued-in continuedInSessionId: the session this one continues in"),
        _c("record_count", I64, "rows of this stream in records"),
        _c("line_count", I64, "rows of this stream's files in source_lines"),
        _c("sidecar", JSON, "the sidecar .meta.json as read (native)", json=True),
        _c("meta", JSON, "_meta of the stream: for an Entire checkpoint, io.entire/checkpoint names the checkpoint "
           "read (and io.entire/tool_use_id the spawning call of a tasks/ subagent); for a Codex rollout, "
           "com.openai.codex/session_meta holds the first session_meta's fields but the instructions (cli_version, "
           "originator, model_provider, git, source, ...); null for other files", json=True),
        _c("source_present", BOOL, "whether the run that wrote this output found the session's source (its files, or "
           "its checkpoint): false for a session kept from an earlier run after its source was deleted, moved away "
           "or not given again (`--prune` drops those); null when the session belongs to no session group"),
        _c("source_last_read_at", TS, "when the run that last read the session's source, converting it, started (UTC); "
           "a session reused unchanged keeps the time of the run that converted it; null when an earlier version "
           "wrote it"),
    ),
    stage="final",
)

RECORDS = Table(
    "records",
    "one row per ASR record",
    "Every record of every stream, ordered by `seq` (file position, never timestamp).",
    (
        _c("record_id", STR, "stable ID: `<session_key>:<native key>`; the native key is the uuid, "
           "`msg:<message.id>` for a folded response, or the position for lines without uuid"),
        _c("session_key", STR, "stream of the record (sessions.session_key)"),
        _c("seq", I64, "1-based order of the record in its stream, by first-seen file position"),
        _c("kind", STR, "ASR record kind: message, tool_result, compaction, hook, session_info, config_change, "
           "checkpoint, usage_summary, request_context, memory_change, queue_operation, progress, attachment (also a "
           "Codex world_state), error, turn_stats (Claude Code turn_duration, a Codex turn's end), subagent (Entire "
           "SubagentStart, SubagentEnd; a Codex SubAgentActivity item), io.entire/compaction (an Entire Compaction "
           "event: audit only), com.openai.codex/token_count (a Codex token_count event), "
           "com.openai.codex/token_usage_record (a Codex token_usage_record line: one response's usage), unknown"),
        _c("position", STR, POSITION_DOC + " (first-seen position of the record)"),
        _c("source_file", STR, "input file path, as given or discovered"),
        _c("source_line", I64, "physical line number (1-based) of the record's first-seen position"),
        _c("timestamp", TS, "native timestamp of the kept observation (UTC); not used for ordering"),
        _c("author", STR, "who wrote it: human, model, agent, harness, hook or tool; null when the transcript does not say"),
        _c("origin", STR, "how it entered: prompt, steer, injected, command, inter_session, tool, compaction; null when unknown"),
        _c("via", STR, "channel it came through (channel for MCP channel messages), else null"),
        _c("trigger_kind", STR, "what started the turn: schedule, task_completion, auto_continuation or peer "
           "(from turnOrigin, or origin.kind task-notification); null for human and sdk turns"),
        _c("trigger_native", STR, "native turnOrigin value behind trigger_kind"),
        _c("trigger_id", STR, "scheduledTaskId of a scheduled turn"),
        _c("trigger_run_id", STR, "scheduledFireId of a scheduled turn"),
        _c("trigger_reason", STR, "fireReason of a scheduled turn"),
        _c("from_session_id", STR, "peer message: the sending session (origin.fromSession)"),
        _c("from_address", STR, "peer message: the sender's address (origin.from); a Codex inter-agent message's "
           "author (the agent path Codex names it by)"),
        _c("from_name", STR, "peer message: the sender's name (origin.name)"),
        _c("prompt_source", STR, "native promptSource (typed, queued, system, sdk)"),
        _c("status", STR, "withdrawn for a queued message pulled back by a queue-operation remove; reverted for a "
           "record of a Codex rollout after the point a later rollout of its thread continues from (thread/revert: "
           "a branch the current thread no longer holds); else null"),
        _c("parent_record_id", STR, "record holding the native parentUuid; null for roots and dangling parents"),
        _c("logical_parent_record_id", STR, "record holding logicalParentUuid (compact boundaries); for the first record "
           "of a Codex thread's later rollout (thread/revert), the last record before the cut in the rollout it continues"),
        _c("turn_id", STR, "turn: the prompt's promptId, carried forward to the records that follow it"),
        _c("native_type", STR, "native `type` of the line"),
        _c("native_subtype", STR, "native subtype: system subtype, attachment type, progress data type, queue operation"),
        _c("uuid", STR, "native uuid (first line for a folded response)"),
        _c("parent_uuid", STR, "native parentUuid"),
        _c("message_id", STR, "native message.id (assistant responses)"),
        _c("inference_id", STR, "inference this response belongs to (assistant message.id; for Codex the response_id "
           "of a token_usage_record, or the ID derived from a token_count's usage pair), null for synthetic error lines"),
        _c("request_id", STR, "native requestId (HTTP request, not the inference ID)"),
        _c("model", STR, "message.model"),
        _c("is_sidechain", BOOL, "native isSidechain"),
        _c("is_meta", BOOL, "native isMeta"),
        _c("is_api_error", BOOL, "synthetic assistant record flagged isApiErrorMessage (a failed attempt)"),
        _c("permission_mode", STR, "permissionMode recorded on a prompt"),
        _c("entrypoint", STR, "native entrypoint (cli, sdk-cli, ...): the client that wrote the line"),
        _c("copied_from_session_id", STR, "forkedFrom.sessionId: the session this record was copied from "
           "by a fork or branch (proof native_field)"),
        _c("copied_from_uuid", STR, "forkedFrom.messageUuid: the record it was copied from"),
        _c("assembly_mode", STR, "folded when the record was assembled from several lines sharing message.id (ASR-511)"),
        _c("observation_count", I64, "input objects folded or deduplicated into this record"),
        _c("record_source", STR, "transcript (a line of the stream's own file), agent_progress (rebuilt from a "
           "copy embedded in the parent's progress line; position then reads agent_progress:line:N of the parent file), "
           "entire_transcript, or entire_events (an Entire lifecycle event, after the stream's transcript records)"),
        _c("copy_of_record_id", STR, "for an agent_progress record: the subagent record its embedded message copies"),
        _c("has_revision_history", BOOL, "a uuid of this record was written again with different content "
           "(the overwritten snapshots are kept in source_lines.native)"),
        _c("cwd", STR, "native cwd at write time"),
        _c("git_branch", STR, "native gitBranch at write time"),
        _c("version", STR, "Claude Code version that wrote the kept observation"),
        _c("native", JSON, "the kept observation, verbatim JSON", json=True),
    ),
)

PARTS = Table(
    "parts",
    "one row per content block of a record",
    "Content blocks in order; a folded response lists the distinct blocks of all its lines in first-seen order.",
    (
        _c("record_id", STR, "record the block belongs to"),
        _c("session_key", STR, "stream of the record"),
        _c("part_index", I64, "0-based index of the block in the record"),
        _c("part_type", STR, "text, thinking, redacted_thinking, tool_use, tool_result, image, document, data "
           "(an attachment's structured content), or the native block type"),
        _c("text", STR, "text of a text block, thinking of a thinking block, or a tool result's text content",
           long=True),
        _c("call_id", STR, "tool_use.id, or tool_result.tool_use_id"),
        _c("tool_name", STR, "tool_use.name"),
        _c("tool_input", JSON, "tool_use.input", json=True),
        _c("is_error", BOOL, "tool_result.is_error (null when absent)"),
        _c("media_type", STR, "image or document source media type"),
        _c("schema", STR, "for data parts: com.anthropic.claude-code/attachment/<attachment type>, or "
           "com.openai.codex/world_state (a Codex world_state line's state)"),
        _c("capture_state", STR, "what is held (ASR-238): complete; empty (an attachment with no structured content); "
           "external (a tool output persisted to tool-results/, file present in the archive); truncated (that file is gone); "
           "encrypted (a Codex reasoning item's encrypted_content, or an agent_message item's encrypted_content entry: "
           "held verbatim in the JSON of the line the part names, not readable)"),
        _c("persisted_file", STR, "name of the tool-results/ file a persisted tool output points to"),
        _c("display_content", JSON, "an attachment's rendered text (UI rendering, `rendered`), kept apart from its data",
           json=True),
        _c("source_file", STR, "file of the line the block was first seen on"),
        _c("source_line", I64, "physical line the block was first seen on"),
        _c("source_sub", I64, "k when that line held several objects and the block is in the k-th (source_lines.sub)"),
        _c("native_path", STR, "JSON path of the block in that object, which source_lines (source_file, line, sub) "
           "names: `$.message.content[2]`, `$.message.content` (a string content), `$.content`, `$.attachment`, "
           "`$.attachment.content[0]`; `$.data.message.message.content[1]` for a record rebuilt from an "
           "agent_progress copy. The block's JSON is not stored twice: see docs/asr-tables.md, Exact JSON"),
    ),
)

_USAGE_COLS = (
    _c("input_uncached_tokens", I64, "usage.input_tokens: input not read from or written to cache; null when not reported"),
    _c("input_total_tokens", I64, "input_tokens + cache_read + cache_write; null when any is not reported"),
    _c("input_includes_cache", BOOL, "true: input_total_tokens includes cache reads and writes"),
    _c("cache_read_tokens", I64, "usage.cache_read_input_tokens"),
    _c("cache_write_tokens", I64, "usage.cache_creation_input_tokens (the aggregate, ASR-326)"),
    _c("cache_write_5m_tokens", I64, "usage.cache_creation.ephemeral_5m_input_tokens (the split, kept even when it disagrees with the aggregate)"),
    _c("cache_write_1h_tokens", I64, "usage.cache_creation.ephemeral_1h_input_tokens"),
    _c("output_total_tokens", I64, "usage.output_tokens; a lower bound when usage_complete is false"),
    _c("output_reasoning_tokens", I64, "reasoning output; Claude Code does not report it separately, so null"),
    _c("service_tier", STR, "usage.service_tier (params.serviceTier)"),
    _c("attributed_mcp_server", STR, "attributionMcpServer of the response (attributedTo); its position after a "
       "result does not identify a call"),
    _c("attributed_mcp_tool", STR, "attributionMcpTool of the response (attributedTo)"),
)

INFERENCE_OBSERVATIONS = Table(
    "inference_observations",
    "one row per (stream, inference): the latest native observation of a response in one stream",
    "Usage evidence: every stream's view of each inference. Exactly one row per inference_id is selected.",
    (
        _c("inference_id", STR, "assistant message.id"),
        _c("session_key", STR, "stream holding this observation"),
        _c("record_id", STR, "the folded response record in that stream"),
        _c("model", STR, "message.model"),
        _c("stop_reason", STR, "stop_reason of the latest observation; null when upstream never wrote it"),
        *_USAGE_COLS,
        _c("usage_source", STR, "where the usage was read: transcript (an assistant line of a transcript file), "
           "agent_progress (a copy in the parent's progress line, the subagent file being absent), token_usage_record "
           "(a Codex token_usage_record line's usage) or token_count (a Codex token_count event's last_token_usage, in "
           "a file or the part of a file without records)"),
        _c("usage_position", STR, "position of the line the usage was taken from"),
        _c("usage_source_file", STR, "file of that line"),
        _c("usage_source_line", I64, "physical line of that line"),
        _c("line_count", I64, "assistant lines of this response in the stream"),
        _c("is_selected", BOOL, "this observation is the one reported in inferences"),
    ),
    stage="final",
)

INFERENCES = Table(
    "inferences",
    "one row per inference_id in the whole output",
    "One usage report per inference, selected across all streams (see the usage selection policy).",
    (
        _c("inference_id", STR, "assistant message.id (the provider response ID); for Codex the response_id of its "
           "token_usage_record, else an ID derived from its token_count usage pair (`codex:usage:...`)"),
        _c("session_key", STR, "stream of the selected observation"),
        _c("record_id", STR, "response record of the selected observation"),
        _c("model", STR, "message.model"),
        _c("stop_reason", STR, "stop_reason of the selected observation"),
        *_USAGE_COLS,
        _c("params", JSON, "request parameters (inference.params) from the api-request record whose requestRef maps "
           "to this inference, when the transcript has one", json=True),
        _c("usage_complete", BOOL, "false when the selected observation has no stop reason: upstream wrote "
           "streaming placeholders, so output_total_tokens is a lower bound"),
        _c("usage_source", STR, "where the usage was read: transcript, agent_progress, token_usage_record or token_count "
           "(see inference_observations)"),
        _c("usage_position", STR, "position the usage came from"),
        _c("usage_source_file", STR, "file the usage came from"),
        _c("usage_source_line", I64, "line the usage came from"),
        _c("observation_count", I64, "streams that observed this inference (copies from resume or fork included)"),
    ),
    stage="final",
)

TOOL_CALLS = Table(
    "tool_calls",
    "one row per tool call (call_id) per stream",
    "Tool calls joined with their results on call_id.",
    (
        _c("call_id", STR, "tool_use.id; for a `!` shell command, the uuid of its <bash-input> line"),
        _c("session_key", STR, "stream of the call"),
        _c("tool_name", STR, "tool name as called"),
        _c("tool_kind", STR, "execute, edit, read, search, fetch or other (by name, registry entry)"),
        _c("mcp_server", STR, "server part of an MCP composite name mcp__<server>__<tool>"),
        _c("provider_kind", STR, "mcp for MCP tools (identity unknown), else null"),
        _c("requested_by", STR, "model for tool_use blocks; user for `!` shell commands (<bash-input>) and a Codex "
           "CommandExecution item of a user's shell command (source userShell)"),
        _c("status", STR, "completed, error, denied, interrupted, cancelled, or pending (no result in this capture)"),
        _c("is_error", BOOL, "tool_result.is_error of the result; for Codex, exit_code is not 0, else the tool item's "
           "status failed (an MCP call's error or result.isError), false when completed (null without either)"),
        _c("exit_code", I64, "the command's exit code where the transcript records one (Codex; Claude Code records none)"),
        _c("exit_code_source", STR, "where exit_code was read: command_execution (a Codex paginated thread's "
           "CommandExecution item naming the call), exec_command_end (a Codex event joined by call_id), "
           "output_metadata (metadata.exit_code of an old shell output's JSON) or output_text (an \"Exit code: N\" "
           "or \"Process exited with code N\" header line of the output)"),
        _c("duration_ms", I64, "the command's run time where the transcript records one: a CommandExecution or "
           "McpToolCall item's duration, exec_command_end duration, "
           "metadata.duration_seconds or a \"Wall time: X seconds\" header line, the first of those that has it"),
        _c("denial_kind", STR, "toolDenialKind of the result, which sets the status; for a result without "
           "toolDenialKind or permissionDecision, the kind its text marks in the same values: user-rejected, "
           "cancelled or interrupted (permission_evidence text_marker)"),
        _c("permission", STR, "compact approval decision (ASR-279): allow_once, allow_always (source user_permanent) "
           "or reject_once, from permissionDecision; reject_once for a rejection or cancellation its text marks"),
        _c("permission_decided_by", STR, "policy (config), user, hook, or classifier (reasonType classifier); user "
           "for a rejection or cancellation its text marks"),
        _c("permission_native", JSON, "permissionDecision {decision, source, reasonType} as recorded", json=True),
        _c("permission_evidence", STR, "where denial_kind, permission and permission_decided_by were read: native_field "
           "(the result's permissionDecision or toolDenialKind) or text_marker (an error result with neither field "
           "whose text starts with what Claude Code writes for a person's rejection, a cancellation or an "
           "interruption: sql/macros/denial_marker.sql); null when the result records no decision or denial"),
        _c("denial_reason", STR, "what the user said when rejecting the call: the result's text after \"To tell you "
           "how to proceed, the user said:\" (older: \"The user provided the following reason for the rejection:\"), "
           "verbatim; null otherwise"),
        _c("call_record_id", STR, "response record holding the tool_use"),
        _c("result_record_id", STR, "record holding the tool_result"),
        _c("call_position", STR, "position of the tool_use line"),
        _c("result_position", STR, "position of the tool_result line"),
        _c("called_at", TS, "timestamp of the tool_use line"),
        _c("result_at", TS, "timestamp of the tool_result line"),
        _c("input", JSON, "tool_use.input", json=True),
        _c("result_native", JSON, "toolUseResult of the result line (Claude Code's structured result)", json=True),
    ),
)

LINEAGE = Table(
    "lineage",
    "one row per (child stream, relation)",
    "Edges between streams: subagents spawned by a tool call of their parent, and forks. A root is never "
    "claimed from one transcript: a stream without a row here may still have a parent elsewhere.",
    (
        _c("session_key", STR, "child stream"),
        _c("relation", STR, "spawned_by (launched by the parent's tool call), forked_from (records copied by a "
           "fork or branch; a Codex thread's forked_from_id), inherits (a fork that references the parent's prefix: "
           "fork-context-ref, a Codex history_base) or continues (an Entire lifecycle event's previous_session_id)"),
        _c("parent_session_key", STR, "stream holding the spawning tool call; for forks the other session's ID"),
        _c("call_id", STR, "tool_use.id of the spawning call"),
        _c("call_record_id", STR, "record holding the spawning tool call"),
        _c("scope", STR, "stream kind of the child: subagent or sidechain"),
        _c("role", STR, "agentType of the subagent"),
        _c("evidence", STR, "native_field (the sidecar toolUseId and the parent's result naming the agentId name one "
           "call, as the registry entry requires), native_field_partial (one of the two, or two that disagree), "
           "progress_field (agent_progress lines only), content_match (an inline sidechain matched to its Task call "
           "by prompt), or native_structure (an Entire checkpoint's tasks/<tool use id>/ subagent); for a Codex "
           "subagent thread, native_field when the call naming it is in the session its session_meta names as "
           "parent thread, else native_field_partial; all but native_field and native_structure come with a "
           "lineage loss"),
        _c("evidence_detail", STR, "which native fields establish the edge: entire.tasks, sidecar.toolUseId, tool_result.agentId, "
           "progress.agentId, tool_use.prompt, entire.previous_session_id, spawn_agent.agent_id, "
           "collab_agent_spawn_end.new_thread_id, CollabAgentToolCall.receiver_thread_ids, session_meta.forked_from_id, "
           "session_meta.history_base"),
        _c("reason", STR, "for continues: why the session continues the other; other for Entire's previous_session_id, "
           "which does not say; null for the other relations"),
        _c("parent_ordinal_exclusive", I64, "for a Codex fork: where the child's history stops in its parent, as its "
           "session_meta records it (the parent's lines before this ordinal): forked_from_ordinal_exclusive for "
           "forked_from (the logical fork point), history_base.end_ordinal_exclusive for inherits (the rollout it "
           "references, also in sessions.meta); null otherwise"),
    ),
    stage="final",
)

SOURCE_LINES = Table(
    "source_lines",
    "one row per non-blank physical input line (and per recovered object)",
    "Every input line and what became of it: nothing lost is a query on this table.",
    (
        _c("source_file", STR, "input file path"),
        _c("line", I64, "physical line number, 1-based"),
        _c("sub", I64, "k for the k-th object recovered from a line (1-based), else null"),
        _c("byte_offset", I64, "byte offset of the line in the file"),
        _c("byte_length", I64, "length of the line in bytes, without the newline"),
        _c("session_key", STR, "stream the line belongs to"),
        _c("status", STR, "mapped (holds the kept observation), folded (joined into a response), duplicate "
           "(an earlier or identical observation of a uuid), recovered (one of several objects on a line), "
           "rejected, uncommitted (bytes after the file's last newline that do not parse: not yet committed by "
           "the writer, kept in raw; neither a reject nor a loss), or foreign (the file is not Claude Code JSONL, or a "
           "file named with --entire-events holds no event)"),
        _c("reason", STR, "why the line was rejected, recovered, marked duplicate or left uncommitted"),
        _c("record_id", STR, "record the line went into"),
        _c("native", JSON, "the object's JSON when records.native does not hold it verbatim "
           "(folded lines, duplicates and overwritten snapshots)", json=True),
        _c("raw", pa.large_binary(), "the line's bytes when they are not valid UTF-8 (the converted text "
           "has replacement characters) or are uncommitted, else null"),
    ),
)

REJECTS = Table(
    "rejects",
    "one row per rejected line, or per foreign file",
    "Input that could not be read as a JSON object.",
    (
        _c("source_file", STR, "input file path"),
        _c("line", I64, "physical line number; null for a foreign file"),
        _c("byte_offset", I64, "byte offset of the line"),
        _c("byte_length", I64, "length in bytes"),
        _c("reason", STR, "invalid_json, not_an_object, foreign_file, line_too_long (longer than a batch converted "
           "again after running out of memory may decode); for an Entire events file also not_an_event "
           "(type is not an integer) and missing_session_id"),
        _c("detail", STR, "parser message or what the file looks like"),
        _c("first_bytes", STR, "the first 120 bytes, decoded with replacement"),
        _c("raw", pa.large_binary(), "the whole line as read (null for a foreign file, which stays on disk)"),
    ),
)

LOSSES = Table(
    "losses",
    "one row per (stream, loss category)",
    "Declared losses (ASR-157): what the transcript does not say or the conversion could not keep.",
    (
        _c("session_key", STR, "stream the loss applies to; null for the whole run"),
        _c("category", STR, "loss category"),
        _c("detail", STR, "what is missing and why"),
        _c("count", I64, "number of affected items, when countable"),
    ),
    stage="final",
)

SESSION_EVENTS = Table(
    "session_events",
    "one row per change of a session-level value",
    "Titles, names, tags, the last prompt, PR links, continuations, worktrees (session_info) and "
    "permission mode and mode (config_change), written only when the value changes.",
    (
        _c("record_id", STR, "record that set the value (for a prompt's permissionMode, the prompt)"),
        _c("session_key", STR, "stream whose value changed"),
        _c("seq", I64, "seq of that record: events are in file order"),
        _c("event_kind", STR, "session_info or config_change"),
        _c("field", STR, "title, agent_name, tag, last_prompt, pr_link, continued_in, worktree, permission_mode, mode, "
           "or state (running, idle, ended: Entire TurnStart, TurnEnd, SessionEnd; running, idle: Codex "
           "task_started, task_complete or turn_aborted); a Codex turn_context's model, approval_policy, "
           "sandbox_policy (its JSON when an object), reasoning_effort (effort) and cwd (config_change), and a "
           "thread_settings_applied's model, approval_policy, reasoning_effort and cwd; goal and goal_status (a Codex "
           "thread_goal_updated's objective and status, session_info)"),
        _c("value", STR, "the new value"),
        _c("previous_value", STR, "the value it replaced in this stream (null for the first)"),
        _c("title_source", STR, "for titles: model (ai-title), user (custom-title) or summary (a summary of this stream's leaf)"),
        _c("leaf_uuid", STR, "leafUuid of a last-prompt or summary line: the active leaf at that time"),
        _c("native_type", STR, "native type of the line (or user, for a prompt's permissionMode)"),
        _c("native", JSON, "the record's JSON", json=True),
    ),
)

TABLES: tuple[Table, ...] = (
    SESSIONS,
    RECORDS,
    PARTS,
    INFERENCE_OBSERVATIONS,
    INFERENCES,
    TOOL_CALLS,
    SESSION_EVENTS,
    LINEAGE,
    SOURCE_LINES,
    REJECTS,
    LOSSES,
)
