"""Hook executions and compactions.

Each table here is built per batch by sql/batch/hooks/<table name>.sql (see batch/pipeline.py).
"""

from __future__ import annotations

from batch.schema.base import BOOL, I64, JSON, STR, STRS, TS, Table, col

HOOKS = Table(
    "hooks",
    "one row per hook report: a hook attachment, a hook_progress line, a 1.0.x hook system line, "
    "or one hookInfos entry of a stop_hook_summary",
    "Hook executions as the transcript reports them (registry entry, Hooks). One execution can be "
    "reported more than once (a start line, then its outcome; a Stop hook's attachment and its "
    "stop_hook_summary entry): rows of one execution share `execution_key`. "
    "hook_additional_context is not a row here: it is a message (records.kind = 'message', author = 'hook').",
    (
        col("record_id", STR, "record the report belongs to (records.record_id)"),
        col("session_key", STR, "stream of the record"),
        col("seq", I64, "records.seq of the record: order in the stream by file position"),
        col("hook_index", I64, "0-based index of the entry in stop_hook_summary.hookInfos (null for a summary listing "
            "no entry, which still gets one row); 0 for the other forms"),
        col("position", STR, "position of the record in the native transcript (line:N)"),
        col("recorded_at", TS, "native timestamp of the line (UTC); not used for ordering"),
        col("event", STR, "hook event in snake_case (pre_tool_use, post_tool_use, stop, session_start, ...): "
            "from hookEvent, from the hook name of a 1.0.x system line, and stop for a stop_hook_summary"),
        col("native_event", STR, "hookEvent as written (or the event part of a 1.0.x hook name); "
            "null for a stop_hook_summary, which does not name it"),
        col("hook_name", STR, "native hookName, e.g. PostToolUse:Bash or SessionStart:startup "
            "(the bold name of a 1.0.x system line); null for a stop_hook_summary entry"),
        col("command", STR, "the hook command: attachment.command, hook_progress command, hookInfos[].command, "
            "blockingError.command, or the bracketed command of a 1.0.x system line"),
        col("status", STR, "success, non_blocking_error, blocked (hook_blocking_error), cancelled, error "
            "(hook_error_during_execution, or a 1.0.x 'failed to run'), async_response, started (hook_progress, "
            "or a 1.0.x 'Running ...' line), summarized (a stop_hook_summary entry: the hook ran, its own outcome is "
            "not recorded; see hook_errors); null when a 1.0.x system line cannot be read"),
        col("stdout", STR, "hook stdout: attachment.stdout, or the output after 'completed successfully:' of a 1.0.x line"),
        col("stderr", STR, "hook stderr: attachment.stderr, or the text after the status code of a 1.0.x "
            "'failed with non-blocking status code' line"),
        col("content", STR, "attachment.content (hook_success: text passed on; hook_error_during_execution: the "
            "error), or the text of a 1.0.x hook system line with its ANSI escapes removed"),
        col("blocking_error", STR, "hook_blocking_error.blockingError.blockingError: the reason fed back to the model"),
        col("exit_code", I64, "attachment.exitCode, or the status code of a 1.0.x non-blocking error line"),
        col("duration_ms", I64, "attachment.durationMs, or hookInfos[].durationMs of a stop_hook_summary entry"),
        col("is_timed_out", BOOL, "hook_cancelled.timedOut: true when the hook's own timeout cancelled it, "
            "false when the caller aborted it; null when not recorded"),
        col("timeout_ms", I64, "hook_cancelled.timeoutMs: the deadline in force"),
        col("tool_use_id", STR, "native toolUseID the hook ran for: a toolu_ ID for tool events, "
            "otherwise an ID Claude Code minted for the hook run"),
        col("call_id", STR, "tool_use_id when it names a tool call of the same stream (joins tool_calls.call_id)"),
        col("execution_key", STR, "rows of one hook execution share it: `<tool_use_id>|<command>` when both are "
            "recorded, else `<record_id>#<hook_index>`"),
        col("hook_count", I64, "stop_hook_summary.hookCount: hooks run for that stop"),
        col("hook_errors", JSON, "stop_hook_summary.hookErrors: error texts of the stop's hooks (not per hook)", json=True),
        col("is_prevented_continuation", BOOL, "stop_hook_summary.preventedContinuation"),
        col("stop_reason", STR, "stop_hook_summary.stopReason (empty string when written empty)"),
        col("has_output", BOOL, "stop_hook_summary.hasOutput"),
        col("response", JSON, "async_hook_response.response: the hook's JSON answer", json=True),
        col("native_form", STR, "native form of the report: attachment, progress (hook_progress), system "
            "(1.0.43-1.0.56 subtype-less system line), or stop_hook_summary"),
        col("native", JSON, "the native line the row came from, verbatim (a stop_hook_summary entry is "
            "hookInfos[hook_index] of it)", json=True),
    ),
)

COMPACTIONS = Table(
    "compactions",
    "one row per compaction: a compact_boundary with its summary, a microcompact_boundary, "
    "or one context_management.applied_edits entry of a response",
    "Context compactions (registry entry, Notes; ASR-373). A full compaction's summary is not a "
    "message: it is the `summary` of its row. Server-side context edits report counts only.",
    (
        col("record_id", STR, "record of the compaction (the boundary), or of the response holding applied_edits"),
        col("session_key", STR, "stream of the record"),
        col("seq", I64, "records.seq of the record: order in the stream by file position"),
        col("edit_index", I64, "0-based index in context_management.applied_edits for a prune; null otherwise"),
        col("position", STR, "position of the record in the native transcript (line:N)"),
        col("recorded_at", TS, "native timestamp of the boundary line, or of the response line (UTC)"),
        col("compaction_kind", STR, "full (compact_boundary and its isCompactSummary line), micro "
            "(microcompact_boundary), prune (a server-side context edit)"),
        col("edit_type", STR, "applied_edits[].type of a prune, e.g. clear_tool_uses_20250919, clear_thinking_20251015"),
        col("trigger", STR, "compactMetadata.trigger or microcompactMetadata.trigger: auto or manual"),
        col("pre_tokens", I64, "preTokens: context size before the compaction"),
        col("post_tokens", I64, "compactMetadata.postTokens: context size after a full compaction, when recorded"),
        col("tokens_saved", I64, "microcompactMetadata.tokensSaved, or applied_edits[].cleared_input_tokens; "
            "null for a full compaction (not recorded; not derived)"),
        col("duration_ms", I64, "compactMetadata.durationMs"),
        col("cleared_tool_uses", I64, "tool uses whose results were cleared: the number of compactedToolIds of a "
            "micro compaction, or applied_edits[].cleared_tool_uses"),
        col("cleared_thinking_turns", I64, "applied_edits[].cleared_thinking_turns"),
        col("summary", STR, "text of the isCompactSummary line: the summary that replaces the prefix; "
            "null when the transcript has none"),
        col("summary_uuid", STR, "native uuid of the isCompactSummary line"),
        col("compacted_call_ids", STRS, "microcompactMetadata.compactedToolIds: tool calls whose results were cleared"),
        col("cleared_attachment_uuids", STRS, "microcompactMetadata.clearedAttachmentUUIDs"),
        col("logical_parent_record_id", STR, "record holding logicalParentUuid: the last record before the boundary"),
        col("logical_parent_uuid", STR, "native logicalParentUuid of the boundary (kept when its record is not in the capture)"),
        col("replaces", STR, "what the compaction replaces: prefix (full), tool_results (micro), "
            "unknown (prune: the edit reports counts only)"),
        col("metadata", JSON, "compactMetadata, microcompactMetadata, or the applied_edits entry, verbatim", json=True),
        col("native", JSON, "the boundary line, or the response line holding context_management, verbatim", json=True),
    ),
)

TABLES: tuple[Table, ...] = (HOOKS, COMPACTIONS)
