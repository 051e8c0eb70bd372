"""The rows a paginated thread's items and newer line kinds give (reference §14.3, §14.4), beside the
rows tables.py builds from every rollout: parts of the items' records, tool calls and their outcomes,
file changes, plans, session events and lineage. The lines' fates are paginated.py's; `turn_items` is
the TurnItem of each item_completed line (file_idx, line, item), joined to the lines that read it.
"""

from __future__ import annotations

import polars as pl

from batch.formats.codex.paginated import (
    ITEM_COPY, SEARCH_CALL, SEARCH_OUTPUT, TOOL_ITEMS, item_field, item_type, with_items,
)
from batch.schema.plans import PLANS

WORLD_STATE_SCHEMA = "com.openai.codex/world_state"  # parts.schema of a world_state line's data part
PLAN_SOURCE = "plan_item"  # plans.plan_source: a Plan item
EXIT_CODE_SOURCE = "command_execution"  # tool_calls.exit_code_source: a CommandExecution item
SPAWN_SOURCE = "CollabAgentToolCall.receiver_thread_ids"  # lineage_evidence.source
# thread_settings_applied settings that are config changes (the session_events fields turn_context's
# give), each read as codex_lines.sql's settings_<field>
SETTINGS_FIELDS = ("model", "approval_policy", "reasoning_effort", "cwd")
# thread_goal_updated (camelCase): its goal's objective and status (codex_lines.sql's columns) as
# session_info values, by session_events.field
GOAL_FIELDS = {"goal": "goal_objective", "goal_status": "goal_status"}
# a tool item's status (snake_case, camelCase for McpToolCall) as a tool_calls.status
ITEM_STATUSES = {"completed": "completed", "failed": "error", "declined": "denied", "in_progress": "pending",
                 "inProgress": "pending"}


def _paginated(every: pl.DataFrame) -> pl.DataFrame:
    return every.filter(pl.col("is_paginated"))


def _item(*types: str) -> pl.Expr:
    return (pl.col("payload_type") == "item_completed") & (pl.col("line_type") == "event_msg") \
        & item_type().is_in(list(types))


def _described() -> pl.Expr:
    """A tool item line that describes a call: a record of its own, or a copy of a response call's record
    (not a line of a second copy of the session, whose fate is stream_copy)."""
    return _item(*TOOL_ITEMS) & (pl.col("is_record") | (pl.col("reason") == ITEM_COPY))


def parts(every: pl.DataFrame, turn_items: pl.DataFrame) -> list[pl.DataFrame]:
    """The parts of the records of a paginated file's items and newer kinds, each frame with the columns
    tables.parts gives its own (file_idx, line, record_id, session_key, source_file, part fields):
    the text and image entries of UserMessage and AgentMessage, Reasoning's summary entries (thinking)
    and the encrypted content of its response copy (redacted_thinking, read from the copy's line), a
    Plan's text, a tool item of its own's call and result, world_state's state (a data part, as the
    Claude Code entry keeps an environment snapshot attachment), an inter_agent_communication's content
    (an agent_message item's content entries are blocks, as a message item's: tables.parts), a tool
    search call and its output."""
    rows = _paginated(every)
    kept = rows.filter(pl.col("is_record"))
    base = ["file_idx", "line", "record_id", "session_key", "source_file"]
    own = with_items(kept.filter(pl.col("item_type").is_not_null()), turn_items)
    content = own.filter(_item("UserMessage", "AgentMessage")).select(
        *base, block=item_field("content"), index=pl.int_ranges(item_field("content").list.len(), dtype=pl.Int64),
    ).explode("block", "index").filter(pl.col("index").is_not_null()).select(
        *base, part_index="index",
        part_type=pl.col("block").struct.field("type").replace({"Text": "text", "local_image": "image"}),
        text=pl.col("block").struct.field("text"),
        native_path=pl.format("$.payload.item.content[{}]", "index"),
    )
    summaries = own.filter(_item("Reasoning")).select(
        *base, text=item_field("summary_text"), part_index=pl.int_ranges(item_field("summary_text").list.len(),
                                                                          dtype=pl.Int64),
    ).explode("text", "part_index").filter(pl.col("part_index").is_not_null()).select(
        *base, "part_index", "text", part_type=pl.lit("thinking"),
        native_path=pl.format("$.payload.item.summary_text[{}]", "part_index"),
    )
    counts = own.filter(_item("Reasoning")).select("record_id", n=item_field("summary_text").list.len().cast(pl.Int64))
    encrypted = rows.filter(
        (pl.col("reason") == "response_copy") & pl.col("has_encrypted") & (pl.col("payload_type") == "reasoning")
    ).join(counts, on="record_id").select(
        *base, part_index=pl.col("n").fill_null(0), part_type=pl.lit("redacted_thinking"),
        native_path=pl.lit("$.payload.encrypted_content"),
    )
    plans = own.filter(_item("Plan")).select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("text"), text=item_field("text"),
        native_path=pl.lit("$.payload.item.text"),
    )
    tool_use = own.filter(_item(*TOOL_ITEMS)).select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("tool_use"), call_id="item_call_key",
        tool_name="item_call_name", tool_input=_item_input(), native_path=pl.lit("$.payload.item"),
    )
    tool_result = own.filter(_item(*TOOL_ITEMS)).select(
        *base, part_index=pl.lit(1, pl.Int64), part_type=pl.lit("tool_result"), call_id="item_call_key",
        text=_item_output(), native_path=pl.lit("$.payload.item"),
    )
    world = kept.filter(pl.col("line_type") == "world_state").select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("data"), schema=pl.lit(WORLD_STATE_SCHEMA),
        native_path=pl.lit("$.payload.state"),
    )
    inter_agent = (pl.col("line_type") == "inter_agent_communication") & pl.col("message_text").is_not_null()
    said = kept.filter(inter_agent).select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("text"), text="message_text",
        native_path=pl.lit("$.payload.content"),
    )
    search_calls = kept.filter(pl.col("payload_type") == SEARCH_CALL).select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("tool_use"), call_id="call_id",
        tool_name=pl.lit("tool_search"), tool_input="tool_input", native_path=pl.lit("$.payload"),
    )
    search_outputs = kept.filter(pl.col("payload_type") == SEARCH_OUTPUT).select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("tool_result"), call_id="call_id",
        text="output_text", native_path=pl.lit("$.payload.tools"),
    )
    return [content, summaries, encrypted, plans, tool_use, tool_result, world, said, search_calls, search_outputs]


def _item_input() -> pl.Expr:
    """What a tool item of its own was called with: a command's argv (as a shell call's `command`), an
    MCP or dynamic tool's arguments, a file change's changes, a web search's action, a collaboration
    tool's name and prompt."""
    return (
        pl.when(item_type() == "CommandExecution").then(pl.concat_str(pl.lit('{"command":'), item_field("command"),
                                                                       pl.lit("}")))
        .when(item_type().is_in(["McpToolCall", "DynamicToolCall"])).then(item_field("arguments"))
        .when(item_type() == "FileChange").then(item_field("changes"))
        .when(item_type() == "WebSearch").then(item_field("action"))
        .when(item_type() == "CollabAgentToolCall").then(
            pl.struct(tool=item_field("tool"), prompt=item_field("prompt")).struct.json_encode())
    )


def _item_output() -> pl.Expr:
    """A tool item's result text: a command's aggregated output, an MCP result's JSON, a file change's stdout."""
    return (
        pl.when(item_type() == "CommandExecution").then(item_field("aggregated_output"))
        .when(item_type() == "McpToolCall").then(pl.coalesce(item_field("result"), item_field("error")))
        .when(item_type() == "FileChange").then(item_field("stdout"))
    )


def calls(every: pl.DataFrame, turn_items: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The calls and results tables.calls adds to the response calls of every file: a paginated file's
    tool search calls and outputs, and its tool items of their own (one record, both call and result)."""
    kept = _paginated(every).filter(pl.col("is_record"))
    searches = kept.filter(pl.col("payload_type") == SEARCH_CALL).select(
        "session_key", "call_id", tool_name=pl.lit("tool_search"), call_record_id="record_id",
        call_position="position", called_at="timestamp", input="tool_input", native_status="native_status",
    )
    own = with_items(kept.filter(_item(*TOOL_ITEMS)), turn_items)
    items = own.select(
        "session_key", call_id="item_call_key", tool_name="item_call_name", call_record_id="record_id",
        call_position="position", called_at="timestamp", input=_item_input(), native_status=item_field("status"),
        # a user's shell command (source userShell), as the Claude Code entry's ! commands
        requested_by=pl.when(pl.col("is_user_shell")).then(pl.lit("user")).otherwise(pl.lit("model")),
    )
    outputs = kept.filter(pl.col("payload_type") == SEARCH_OUTPUT).select(
        "session_key", "call_id", result_record_id="record_id", result_position="position", result_at="timestamp",
    )
    results = own.select(
        "session_key", call_id="item_call_key", result_record_id="record_id", result_position="position",
        result_at="timestamp",
    )
    return pl.concat([searches, items], how="diagonal_relaxed"), pl.concat([outputs, results])


def outcomes(every: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """What each tool item says of its call, by (session_key, call_id): the exit code and run time of a
    command (CommandExecution.exit_code, duration {secs, nanos}), its status as a tool_calls status,
    and whether it failed (status failed; an MCP call's error or result.isError)."""
    duration = item_field("duration")
    secs = duration.struct.field("secs").cast(pl.Float64, strict=False)
    nanos = duration.struct.field("nanos").cast(pl.Float64, strict=False).fill_null(0)
    status = item_field("status")
    mcp_error = (item_type() == "McpToolCall") & (
        (item_field("error").is_not_null() & (item_field("error") != "null"))
        | (item_field("result").str.json_path_match("$.isError") == "true")
    )
    return with_items(_paginated(every).filter(_described()), turn_items).select(
        "session_key", call_id="item_call_key",
        item_exit_code=item_field("exit_code").cast(pl.Int64, strict=False),
        item_duration_ms=(secs * 1000 + nanos / 1e6).round(0).cast(pl.Int64),
        item_status=status.replace_strict(ITEM_STATUSES, default=None, return_dtype=pl.String),
        item_is_error=pl.when(mcp_error.fill_null(False) | (status == "failed")).then(True)
        .when(status == "completed").then(False),
    ).unique(["session_key", "call_id"], keep="first", maintain_order=True)


def file_change_items(every: pl.DataFrame, turn_items: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """The FileChange items that applied (status completed, or none written) with the record that holds
    them (the result of the call they describe, or their own) and its seq: the rows
    sql/batch/codex/codex_file_changes.sql makes one per changed path."""
    changes = with_items(_paginated(every).filter(_described() & item_type().eq("FileChange")), turn_items)
    return changes.filter(item_field("status").fill_null("completed").eq("completed")).select(
        "record_id", "session_key", call_id="item_call_key", tool_name="item_call_name",
        changed_at=pl.col("timestamp").dt.convert_time_zone("UTC"), changes=item_field("changes"),
    ).join(records.select("record_id", "seq"), on="record_id", how="left")


def plans(every: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """A Plan item (the plan a plan-mode turn proposes) is a document plan that replaces the plan, as
    the Claude Code entry maps ExitPlanMode's plan; its identity is the item's id (Codex writes no
    plan file; the Claude Code entry falls back to the call's id)."""
    kept = with_items(_paginated(every).filter(pl.col("is_record") & _item("Plan")), turn_items)
    frame = kept.select(
        "record_id", "session_key", plan_source=pl.lit(PLAN_SOURCE), plan_id=item_field("id"),
        plan_type=pl.lit("document"), op=pl.lit("replace"), content=item_field("text"), position="position",
        recorded_at=pl.col("timestamp").dt.convert_time_zone("UTC"),
        native=pl.col("text").str.json_path_match("$.payload.item"),
    )
    return frame.select(*(c for c in PLANS.names if c in frame.columns))


def session_event_rows(every: pl.DataFrame) -> pl.DataFrame:
    """thread_settings_applied's settings as config changes (the fields turn_context's give), and
    thread_goal_updated's goal objective and status as session_info values, with the record, native
    type and JSON tables.session_events keeps; none from inherited context (not the thread's own)."""
    own = pl.col("is_record") & ~pl.col("is_inherited")
    kept = _paginated(every).filter(own & (pl.col("line_type") == "event_msg"))
    settings = kept.filter(pl.col("payload_type") == "thread_settings_applied").select(
        "record_id", native="text", **{field: f"settings_{field}" for field in SETTINGS_FIELDS},
    ).unpivot(index=["record_id", "native"], variable_name="field", value_name="value").with_columns(
        event_kind=pl.lit("config_change"),
    )
    goals = kept.filter(pl.col("payload_type") == "thread_goal_updated").select(
        "record_id", native="text", **GOAL_FIELDS,
    ).unpivot(index=["record_id", "native"], variable_name="field", value_name="value").with_columns(
        event_kind=pl.lit("session_info"),
    )
    return pl.concat([settings, goals]).filter(pl.col("value").is_not_null()).select(
        "record_id", "event_kind", "field", "value", native_type=pl.lit("event_msg"), native="native",
    )


def lineage_rows(every: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """A CollabAgentToolCall item of a spawn_agent call names the threads it started
    (receiver_thread_ids), each spawned by that call, in the thread the line was written in."""
    spawns = with_items(_paginated(every).filter(_described() & item_type().eq("CollabAgentToolCall")), turn_items)
    return spawns.filter(item_field("tool").eq("spawn_agent")).select(
        child_session_key=item_field("receiver_thread_ids"), relation=pl.lit("spawned_by"),
        parent_session_key=pl.coalesce("thread", "session_key"), call_id="item_call_key", source=pl.lit(SPAWN_SOURCE),
    ).explode("child_session_key").filter(pl.col("child_session_key").is_not_null())
