"""Per-object shaping: ASR record kind, author, origin and folding keys.

Who wrote a message is read from origin.kind, isMeta and the text markers, not from the record
type (registry entry, "Who wrote a message"); where no marker says, author stays null.
"""

from __future__ import annotations

import polars as pl

SYNTHETIC_MODEL = "<synthetic>"

SESSION_INFO_TYPES = (
    "summary", "ai-title", "custom-title", "agent-name", "tag", "last-prompt", "pr-link",
    "worktree-state", "continued-in", "fork-context-ref", "agent-color", "agent-setting", "relocated",
)
CONFIG_TYPES = ("permission-mode", "mode")
HOOK_ATTACHMENTS = (
    "hook_success", "hook_non_blocking_error", "hook_blocking_error", "hook_cancelled",
    "hook_error_during_execution", "async_hook_response",
)
SYSTEM_KINDS = {
    "compact_boundary": "compaction",
    "microcompact_boundary": "compaction",
    "stop_hook_summary": "hook",
    "local_command": "message",
    "api_error": "error",
    "turn_duration": "turn_stats",
    "away_summary": "message",
    "informational": "message",
    "memory_saved": "memory_change",
}
REQUEST_CONTEXT_TYPES = ("api-request", "api-request-blob", "api-request-shape")


# turnOrigin -> trigger kind (registry entry, Triggers); human and sdk turns get no trigger.
TRIGGER_KINDS = {
    "scheduled": "schedule",
    "task_notification": "task_completion",
    "auto_continuation": "auto_continuation",
    "peer": "peer",
}
NO_TRIGGER = ("human", "sdk", "user")  # "user": a typed prompt (2.1.28x)


def _text_starts(*markers: str) -> pl.Expr:
    head = pl.col("text_head").fill_null("").str.strip_chars_start()
    expr = pl.lit(False)
    for m in markers:
        expr = expr | head.str.starts_with(m)
    return expr


def classify(obs: pl.DataFrame) -> pl.DataFrame:
    """Add kind, author, origin, via and the synthetic/tool-result flags to decoded observations."""
    t = pl.col("native_type")
    synthetic = (pl.col("model") == SYNTHETIC_MODEL).fill_null(False) | pl.col("is_api_error").fill_null(False)
    # a user `!` shell command's output (<bash-stdout>) is the result of a call the user requested
    tool_result = (t == "user") & (
        (pl.col("first_block_type") == "tool_result").fill_null(False) | _text_starts("<bash-stdout>", "<bash-stderr>")
    )
    compact_summary = (t == "user") & pl.col("is_compact_summary").fill_null(False)
    via = pl.when(pl.col("origin_kind") == "channel").then(pl.lit("channel")).otherwise(pl.lit(None, dtype=pl.String))
    return obs.with_columns(
        kind=_kind(tool_result, compact_summary),
        author=_author(synthetic, tool_result, compact_summary),
        origin=_origin(tool_result, compact_summary),
        via=via,
        **_trigger_columns(),
        **_peer_columns(),
        is_synthetic=synthetic & (t == "assistant"),
        is_compact_summary=compact_summary,
    )


def _kind(tool_result: pl.Expr, compact_summary: pl.Expr) -> pl.Expr:
    """The ASR record kind, by native type: messages, then system, session and harness records."""
    t = pl.col("native_type")
    sub = pl.col("native_subtype")
    return (
        pl.when(t == "assistant").then(pl.lit("message"))
        .when(compact_summary).then(pl.lit("compaction"))
        .when(tool_result).then(pl.lit("tool_result"))
        .when(t == "user").then(pl.lit("message"))
        .when(t == "system").then(_system_kind())
        .when(t.is_in(SESSION_INFO_TYPES)).then(pl.lit("session_info"))
        .when(t.is_in(CONFIG_TYPES)).then(pl.lit("config_change"))
        # file-history-delta and bridge-session are not named by the registry entry: kind unknown
        .when(t == "file-history-snapshot").then(pl.lit("checkpoint"))
        .when(t == "cost-state").then(pl.lit("usage_summary"))
        .when(t.is_in(REQUEST_CONTEXT_TYPES)).then(pl.lit("request_context"))
        .when(t == "queue-operation").then(pl.lit("queue_operation"))
        .when(t == "progress").then(
            pl.when(sub == "hook_progress").then(pl.lit("hook")).otherwise(pl.lit("progress"))
        )
        .when(t == "attachment").then(_attachment_kind())
        .otherwise(pl.lit("unknown"))
    )


def _system_kind() -> pl.Expr:
    """The kind of a system record, by its subtype; one with a tool_use_id and no subtype is a hook's."""
    sub = pl.col("native_subtype")
    return (
        pl.when(sub.is_null() & pl.col("tool_use_id").is_not_null()).then(pl.lit("hook"))
        .otherwise(sub.replace_strict(SYSTEM_KINDS, default="unknown", return_dtype=pl.String))
    )


def _attachment_kind() -> pl.Expr:
    """The kind of an attachment record, by its subtype: a hook's, a hook's added context, or an attachment."""
    sub = pl.col("native_subtype")
    return (
        pl.when(sub.is_in(HOOK_ATTACHMENTS)).then(pl.lit("hook"))
        .when(sub == "hook_additional_context").then(pl.lit("message"))
        .otherwise(pl.lit("attachment"))
    )


def _author(synthetic: pl.Expr, tool_result: pl.Expr, compact_summary: pl.Expr) -> pl.Expr:
    """Who wrote the record; null where no marker says."""
    t = pl.col("native_type")
    sub = pl.col("native_subtype")
    origin_kind = pl.col("origin_kind")
    return (
        pl.when(t == "assistant").then(pl.when(synthetic).then(pl.lit("harness")).otherwise(pl.lit("model")))
        .when(tool_result).then(pl.lit("tool"))
        .when(compact_summary).then(pl.lit("harness"))
        .when((t == "attachment") & (sub == "hook_additional_context")).then(pl.lit("hook"))
        .when(_human()).then(pl.lit("human"))
        .when(origin_kind.is_in(["peer", "coordinator", "observer"]).fill_null(False)).then(pl.lit("agent"))
        .when(origin_kind == "task-notification").then(pl.lit("harness"))
        .when(pl.col("is_meta").fill_null(False)).then(pl.lit("harness"))
        .when((t == "user") & _text_starts("<local-command-stdout>")).then(pl.lit("harness"))
        .when(t.is_in(["system", "attachment", "progress", *REQUEST_CONTEXT_TYPES])).then(pl.lit("harness"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def _origin(tool_result: pl.Expr, compact_summary: pl.Expr) -> pl.Expr:
    """Where the record's content came from: a tool, a compaction, the human, another session, the harness."""
    t = pl.col("native_type")
    sub = pl.col("native_subtype")
    origin_kind = pl.col("origin_kind")
    human = _human()
    return (
        pl.when(tool_result).then(pl.lit("tool"))
        .when(compact_summary).then(pl.lit("compaction"))
        .when((t == "attachment") & (sub == "queued_command") & human).then(pl.lit("steer"))
        .when(human).then(pl.lit("prompt"))
        .when(origin_kind == "peer").then(pl.lit("inter_session"))
        .when(origin_kind == "task-notification").then(pl.lit("injected"))
        .when(pl.col("is_meta").fill_null(False) | (t == "attachment")).then(pl.lit("injected"))
        .when(_text_starts("<command-name>", "<command-message>")).then(pl.lit("command"))
        .when((t == "system") & (sub == "local_command")).then(pl.lit("command"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def _human() -> pl.Expr:
    return (pl.col("origin_kind") == "human").fill_null(False)


def _trigger_columns() -> dict[str, pl.Expr]:
    """The trigger_* columns: what started the turn (a schedule, a task's completion, a peer), from turnOrigin."""
    origin_kind = pl.col("origin_kind")
    turn = pl.col("turn_origin")
    has_trigger = turn.is_not_null() & ~turn.is_in(NO_TRIGGER)
    notified = (origin_kind == "task-notification").fill_null(False)
    trigger_kind = (
        pl.when(notified & (pl.col("origin_subkind") == "scheduled-trigger").fill_null(False)).then(pl.lit("schedule"))
        .when(has_trigger).then(turn.replace_strict(TRIGGER_KINDS, default=None, return_dtype=pl.String))
        .when(notified).then(pl.lit("task_completion"))
        .when(pl.col("scheduled_task_id").is_not_null()).then(pl.lit("schedule"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    return {
        "trigger_kind": trigger_kind,
        "trigger_native": pl.when(has_trigger).then(turn).otherwise(pl.lit(None, dtype=pl.String)),
        "trigger_id": pl.col("scheduled_task_id"),
        "trigger_run_id": pl.col("scheduled_fire_id"),
        "trigger_reason": pl.col("fire_reason"),
    }


def _peer_columns() -> dict[str, pl.Expr]:
    """The from_* columns: the session, address and name a peer message came from."""
    peer = (pl.col("origin_kind") == "peer").fill_null(False)
    return {
        "from_session_id": pl.when(peer).then(pl.col("origin_from_session")).otherwise(pl.lit(None, dtype=pl.String)),
        "from_address": pl.when(peer).then(pl.col("origin_from")).otherwise(pl.lit(None, dtype=pl.String)),
        "from_name": pl.when(peer).then(pl.col("origin_name")).otherwise(pl.lit(None, dtype=pl.String)),
    }
