"""The classified rollout lines as frames of the output tables and of the work tables the final stage reads."""

from __future__ import annotations

import json

import polars as pl

from batch.formats.codex import items
from batch.formats.codex.classify import (
    CALLS, COPIES, RESULTS, TOKEN_COUNT_KIND, TURN_ENDS, TURN_STARTS, USAGE_RECORD_KIND,
)
from batch.schema.hooks import COMPACTIONS
from batch.schema.core import PARTS, RECORDS, REJECTS, SESSION_EVENTS, SOURCE_LINES, TOOL_CALLS
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import Stream
from batch.sources.codex import FORMAT

AGENT = "codex"
USAGE_SOURCE = "token_count"  # inferences.usage_source: an event_msg token_count line (sql/final/inferences.sql)
# tool kind by name, as the Claude Code entry maps Bash, Edit/Write, Read, Grep/Glob/ToolSearch, WebSearch
TOOL_KINDS = {
    "shell": "execute", "container.exec": "execute", "exec_command": "execute", "write_stdin": "execute",
    "local_shell": "execute", "apply_patch": "edit", "view_image": "read", "web_search": "fetch",
    "tool_search": "search",
    # a paginated thread's tool item with no response call (a user's shell command), by its item type
    "CommandExecution": "execute", "FileChange": "edit", "WebSearch": "fetch",
}
CALL_NAMES = {"local_shell_call": "local_shell", "web_search_call": "web_search"}
ENCRYPTED_DETAIL = (
    "reasoning (and remote compaction) items hold encrypted_content, opaque to anyone but the provider: "
    "only the summaries are text in parts; the encrypted text is kept verbatim in records.native"
)

EXIT_CODE_DETAIL = (
    "shell calls whose output holds no exit code in a form read (metadata.exit_code of an old shell output, "
    "an \"Exit code: N\" or \"Process exited with code N\" header line) and no exec_command_end event gives one: "
    "a redacted output, or a text of another form (parts.text of the tool_result); tool_calls.exit_code is null"
)


def records(every: pl.DataFrame) -> pl.DataFrame:
    kept = every.filter(pl.col("is_record"))
    copies = every.filter(pl.col("status") == "duplicate").group_by("record_id").len("copies")
    frame = kept.join(copies, on="record_id", how="left").select(
        "record_id", "session_key",
        # a thread's rollouts in order (formats/codex/rollouts.py), each by position
        seq=pl.int_range(1, pl.len() + 1).over("session_key", order_by=["rollout_order", "line", "stream_rank"])
        .cast(pl.Int64),
        kind="kind", position="position", source_file="source_file", source_line="line",
        timestamp=pl.col("timestamp").dt.convert_time_zone("UTC"),
        author="author", origin="origin", turn_id="turn",
        native_type="line_type", native_subtype="payload_type",
        inference_id="inference_id",  # formats/codex/usage.py
        model=pl.when((pl.col("author") == "model") | pl.col("kind").is_in([TOKEN_COUNT_KIND, USAGE_RECORD_KIND]))
        .then("model"),
        status=pl.when(pl.col("is_reverted")).then(pl.lit("reverted")),  # formats/codex/rollouts.py
        logical_parent_record_id="logical_parent_record_id",
        observation_count=(1 + pl.col("copies").fill_null(0)).cast(pl.Int64),
        record_source=pl.lit("transcript"), cwd="cwd_now", version="version", native="text",
        # a line of a fork's copy of its parent's history (codex_lines.sql: thread)
        copied_from_session_id=pl.when(pl.col("thread") != pl.col("own_thread")).then("thread"),
        from_address="from_address",  # an inter-agent message's author (paginated.kinds)
    )
    return shaped(frame, RECORDS.schema)


def parts(every: pl.DataFrame, blocks: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """Content blocks of message and reasoning items; one part per call, result, unpaired event copy, summary;
    the parts of a paginated thread's items and newer kinds (items.parts, `turn_items` its TurnItems)."""
    kept = every.filter(pl.col("is_record"))
    base = ["file_idx", "line", "record_id", "session_key", "source_file"]
    root = pl.when(pl.col("enveloped")).then(pl.lit("$.payload")).otherwise(pl.lit("$"))
    block_type = pl.col("block_type")
    from_blocks = kept.select(base).join(blocks, on=["file_idx", "line"]).select(
        *base, part_index="block_index",
        part_type=pl.when(block_type.is_in(["input_text", "output_text"])).then(pl.lit("text"))
        .when(block_type.is_in(["summary_text", "reasoning_text"])).then(pl.lit("thinking"))
        .when(block_type == "input_image").then(pl.lit("image")).otherwise(block_type),
        text="text", native_path="native_path",
    )
    summaries = blocks.filter(pl.col("item_type") == "reasoning").group_by("file_idx", "line").len("n")
    ptype = pl.col("payload_type")
    encrypted = kept.filter(pl.col("has_encrypted")).join(summaries, on=["file_idx", "line"], how="left").select(
        *base, part_index=pl.col("n").fill_null(0).cast(pl.Int64), part_type=pl.lit("redacted_thinking"),
        native_path=root + ".encrypted_content",
    )
    calls = kept.filter((pl.col("line_type") == "response_item") & ptype.is_in(list(CALLS))).select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("tool_use"), call_id="call_id",
        tool_name=_tool_name(), tool_input="tool_input", native_path=root,
    )
    results = kept.filter((pl.col("line_type") == "response_item") & ptype.is_in(list(RESULTS))).select(
        *base, part_index=pl.lit(0, pl.Int64), part_type=pl.lit("tool_result"), call_id="call_id",
        text="output_text", native_path=root + ".output",
    )
    events = kept.filter((pl.col("line_type") == "event_msg") & ptype.is_in(list(COPIES))).select(
        *base, part_index=pl.lit(0, pl.Int64),
        part_type=pl.when(ptype == "agent_reasoning").then(pl.lit("thinking")).otherwise(pl.lit("text")),
        text="event_text",
        native_path=pl.when(ptype == "agent_reasoning").then(pl.lit("$.payload.text")).otherwise(pl.lit("$.payload.message")),
    )
    # a compaction's summary is no part (compactions)
    frames = [from_blocks, encrypted, calls, results, events, *items.parts(every, turn_items)]
    frame = pl.concat([shaped(f.rename({"line": "source_line"}), PARTS.schema, keep=["file_idx"]) for f in frames])
    # an agent_message item's encrypted_content entry is as opaque as encrypted reasoning
    opaque = pl.col("part_type").is_in(["redacted_thinking", "encrypted_content"])
    frame = frame.with_columns(capture_state=pl.when(opaque).then(pl.lit("encrypted")).otherwise(pl.lit("complete")))
    return shaped(frame.sort("file_idx", "source_line", "part_index"), PARTS.schema)


def _tool_name() -> pl.Expr:
    return pl.coalesce(
        pl.col("tool_name"),
        pl.col("payload_type").replace_strict(CALL_NAMES, default=None, return_dtype=pl.String),
    )


def compactions(records: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame:
    """A `compacted` line is a full compaction (reference §7): its `message` the summary, as the Claude
    Code entry's compact summary is not a message (ASR-373); empty for a remote compaction (null here).
    A paginated thread's ContextCompaction item that no `compacted` line records is one, without summary."""
    kept = every.filter(pl.col("is_record") & (pl.col("kind") == "compaction")).select(
        "record_id", "text", summary=pl.when(pl.col("compacted_text") != "").then("compacted_text"),
    )
    frame = records.select("record_id", "session_key", "seq", "position", "timestamp").join(kept, on="record_id").select(
        "record_id", "session_key", "seq", "position", recorded_at="timestamp",
        compaction_kind=pl.lit("full"), summary="summary", replaces=pl.lit("prefix"), native="text",
    )
    return shaped(frame, COMPACTIONS.schema)


# turn_context settings that are config changes (reference §4), by session_events.field
CONTEXT_FIELDS = {
    "model": "context_model", "approval_policy": "context_approval_policy",
    "sandbox_policy": "context_sandbox_policy", "reasoning_effort": "context_effort", "cwd": "cwd",
}


def session_events(records: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame:
    """Turn starts and ends as the state running and idle (classify.TURN_STARTS, TURN_ENDS), as an Entire
    TurnStart and TurnEnd set it; the settings of each turn_context (CONTEXT_FIELDS) as config changes.
    In file order, per field, a value repeating the one before it is no change (Codex writes a
    turn_context before every request or turn, mostly the same). A paginated thread's settings applied and
    goals (items.session_event_rows) join them; context a subagent inherited is not its own (no row)."""
    states = {**TURN_STARTS, **TURN_ENDS}
    own = pl.col("is_record") & ~pl.col("is_inherited")
    turns = every.filter(
        own & (pl.col("line_type") == "event_msg") & pl.col("payload_type").is_in(list(states))
    ).select("record_id", event_kind=pl.lit("session_info"), field=pl.lit("state"),
             value=pl.col("payload_type").replace_strict(states, return_dtype=pl.String),
             native_type=pl.lit("event_msg"), native="text")
    contexts = every.filter(own & (pl.col("line_type") == "turn_context")).select(
        "record_id", native="text", **CONTEXT_FIELDS,
    ).unpivot(index=["record_id", "native"], variable_name="field", value_name="value").filter(
        pl.col("value").is_not_null()
    ).select("record_id", event_kind=pl.lit("config_change"), field="field", value="value",
             native_type=pl.lit("turn_context"), native="native")
    frame = (
        records.select("record_id", "session_key", "seq")
        .join(pl.concat([turns, contexts, items.session_event_rows(every)]), on="record_id")
        .sort("session_key", "field", "seq")
        .with_columns(previous_value=pl.col("value").shift(1).over("session_key", "field"))
        .filter(pl.col("previous_value").is_null() | (pl.col("value") != pl.col("previous_value")))
        .sort("session_key", "seq", "field")
        .select("record_id", "session_key", "seq", "event_kind", "field", "value", "previous_value",
                "native_type", "native")
    )
    return shaped(frame, SESSION_EVENTS.schema)


def source_lines(every: pl.DataFrame) -> pl.DataFrame:
    frame = every.select(
        "source_file", "line", "byte_offset", "byte_length", "session_key", "status",
        reason=pl.when(pl.col("status") != "mapped").then("reason"),
        record_id="record_id",
        native=pl.when(pl.col("status") == "duplicate").then("text"),
        raw="raw",
    )
    return shaped(frame, SOURCE_LINES.schema)


def rejects(every: pl.DataFrame) -> pl.DataFrame:
    bad = every.filter(pl.col("status") == "rejected").select(
        "source_file", "line", "byte_offset", "byte_length", "reason", "detail",
        first_bytes=pl.col("text").str.slice(0, 120),
        raw=pl.coalesce(pl.col("raw"), pl.col("text").cast(pl.Binary)),
    )
    return shaped(bad, REJECTS.schema)


def tool_calls(calls: pl.DataFrame) -> pl.DataFrame:
    """The rows of `calls`: model calls joined with their first output on call_id in the same stream (a web search has no
    call_id and no output: its position stands in for the call ID), and with the first exec_command_end
    event of that call_id (extended files). The exit code and run time come from a paginated thread's
    CommandExecution item, else the event, else from the output's text (codex_lines.sql: an old shell
    output's metadata, else its header lines); a nonzero exit code is an error, as a failed Bash call is
    (is_error), and so is a tool item's failed status (items.outcomes)."""
    return shaped(calls.drop("still_running"), TOOL_CALLS.schema)


def calls(every: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """tool_calls' rows, with still_running (the output says the process outlived the call) for the
    loss; built once per batch, for both. `turn_items`: a paginated thread's TurnItems (items.py)."""
    kept = every.filter(pl.col("is_record") & (pl.col("line_type") == "response_item"))
    # a paginated thread's tool searches and tool items of their own
    more_calls, more_results = items.calls(every, turn_items)
    calls = pl.concat([kept.filter(pl.col("payload_type").is_in(list(CALLS))).select(
        "session_key", call_id=pl.coalesce("call_id", "position"), tool_name=_tool_name(),
        call_record_id="record_id", call_position="position", called_at="timestamp", input="tool_input",
        native_status="native_status",
    ), more_calls], how="diagonal_relaxed").unique(["session_key", "call_id"], keep="first", maintain_order=True)
    outputs = kept.filter(pl.col("payload_type").is_in(list(RESULTS)) & pl.col("call_id").is_not_null())
    results = pl.concat([outputs.select(
        "session_key", "call_id", "meta_exit_code", "meta_duration_ms", "text_exit_code", "text_duration_ms",
        "still_running", result_record_id="record_id", result_position="position", result_at="timestamp",
    ), more_results], how="diagonal_relaxed").unique(["session_key", "call_id"], keep="first", maintain_order=True)
    ends = every.filter(
        pl.col("is_record") & (pl.col("line_type") == "event_msg") & (pl.col("payload_type") == "exec_command_end")
        & pl.col("call_id").is_not_null()
    ).select("session_key", "call_id", "end_exit_code", "end_duration_ms").unique(
        ["session_key", "call_id"], keep="first", maintain_order=True
    )
    name = pl.col("tool_name")
    mcp = name.str.extract(r"^mcp__(.+?)__.+$", 1)
    # where the exit code is read, first that has one: the item's or the event's field, then the output's text
    sources = {items.EXIT_CODE_SOURCE: "item_exit_code", "exec_command_end": "end_exit_code",
               "output_metadata": "meta_exit_code", "output_text": "text_exit_code"}
    exit_code = pl.coalesce(list(sources.values()))
    source = pl.lit(None, pl.String)
    for label, column in reversed(sources.items()):
        source = pl.when(pl.col(column).is_not_null()).then(pl.lit(label)).otherwise(source)
    keys = ["session_key", "call_id"]
    return (
        calls.join(results, on=keys, how="left", maintain_order="left")
        .join(ends, on=keys, how="left", maintain_order="left")
        .join(items.outcomes(every, turn_items), on=keys, how="left", maintain_order="left")
        .with_columns(
            tool_kind=pl.when(mcp.is_not_null()).then(pl.lit("other"))
            .otherwise(name.replace_strict(TOOL_KINDS, default="other", return_dtype=pl.String)),
            mcp_server=mcp,
            provider_kind=pl.when(mcp.is_not_null()).then(pl.lit("mcp")),
            requested_by=pl.coalesce("requested_by", pl.lit("model")),
            exit_code=exit_code,
            exit_code_source=source,
            duration_ms=pl.coalesce("item_duration_ms", "end_duration_ms", "meta_duration_ms", "text_duration_ms")
            .cast(pl.Int64),
            called_at=pl.col("called_at").dt.convert_time_zone("UTC"),
            result_at=pl.col("result_at").dt.convert_time_zone("UTC"),
        )
        .with_columns(
            is_error=pl.coalesce(pl.col("exit_code") != 0, "item_is_error"),
            status=pl.when(pl.col("exit_code") != 0).then(pl.lit("error"))
            .when(pl.col("item_status").is_in(["error", "denied"])).then("item_status")
            .when(pl.col("result_record_id").is_not_null() | pl.col("exit_code").is_not_null()).then(pl.lit("completed"))
            .when(pl.col("native_status") == "completed").then(pl.lit("completed"))
            .otherwise(pl.lit("pending")),
        )
    )


def inference_candidates(every: pl.DataFrame) -> pl.DataFrame:
    """One row per (stream, response): the first token_count of each distinct usage pair (§9.6).
    Its last_token_usage is the response's usage; input includes cached input, output includes reasoning."""
    counts = every.filter(pl.col("usage_key").is_not_null()).group_by("file_idx", "usage_key").len("line_count")
    frame = every.filter(pl.col("is_record") & pl.col("is_response")).join(
        counts, on=["file_idx", "usage_key"], how="left"
    ).select(
        inference_id="usage_id", **usage_columns("last"), usage_source=pl.lit(USAGE_SOURCE), stream_ord="line",
    )
    return shaped(frame, WORK_SCHEMAS["inference_candidates"])


def usage_columns(prefix: str) -> dict[str, pl.Expr | str]:
    """The inference_candidates columns of a response whose usage is in the columns `<prefix>_input`,
    `_cached`, `_cache_write`, `_output`, `_reasoning` (a token_count's last usage, a record's usage):
    input includes cached input (and cache writes), output includes reasoning."""
    def c(name: str) -> pl.Expr:
        return pl.col(f"{prefix}_{name}")

    return dict(
        session_key="session_key", record_id="record_id", model="model",
        input_uncached_tokens=c("input") - c("cached") - c("cache_write").fill_null(0),
        input_total_tokens=c("input"), input_includes_cache=pl.lit(True),
        cache_read_tokens=c("cached"), cache_write_tokens=c("cache_write"),
        output_total_tokens=c("output"), output_reasoning_tokens=c("reasoning"),
        usage_position="position", usage_source_file="source_file", usage_source_line="line",
        line_count=pl.col("line_count").cast(pl.Int64),
    )


def session_streams(every: pl.DataFrame, streams: list[Stream]) -> pl.DataFrame:
    """One row per session: what the first session_meta of its kept copy says (§3), with its records'
    span; a session read from two copies (a file and an Entire checkpoint's) names both files."""
    meta = (
        every.filter(pl.col("line_type") == "session_meta").group_by("file_idx").agg(pl.all().first())
        .select("file_idx", "cwd", "originator", "cli_version", "model_provider", "git_branch", "forked_from_id",
                meta_text="text", enveloped="enveloped")
    )
    spans = every.group_by("file_idx").agg(
        started_at=pl.col("timestamp").filter(pl.col("is_record")).min(),
        ended_at=pl.col("timestamp").filter(pl.col("is_record")).max(),
        record_count=pl.col("is_record").sum().cast(pl.Int64), line_count=pl.len().cast(pl.Int64),
        cwds=pl.col("cwd").drop_nulls().unique(maintain_order=True),
        versions=pl.col("cli_version").filter(pl.col("line_type") == "session_meta").first().implode(),
        stream_rank=pl.col("stream_rank").first(), rollout_order=pl.col("rollout_order").first(),
    )
    files = pl.DataFrame(
        {"file_idx": range(len(streams)), "session_key": [s.session_key for s in streams],
         "stream_kind": [s.stream_kind for s in streams], "parent_session_id": [s.parent_session_id for s in streams],
         "source_files": [[s.name] for s in streams], "content_level": [s.content_level for s in streams],
         "stream_meta": [s.meta for s in streams]},
        schema={"file_idx": pl.Int32, "session_key": pl.String, "stream_kind": pl.String,
                "parent_session_id": pl.String, "source_files": pl.List(pl.String), "content_level": pl.String,
                "stream_meta": pl.String},
    )
    per_file = files.join(spans, on="file_idx").join(meta, on="file_idx", how="left").sort(
        "session_key", "rollout_order", "stream_rank"
    )
    merged = per_file.group_by("session_key", maintain_order=True).agg(
        pl.all().exclude("source_files", "record_count", "line_count", "started_at", "ended_at", "cwds", "stream_meta")
        .first(),
        source_files=pl.col("source_files").list.explode(keep_nulls=False, empty_as_null=False).sort(),
        record_count=pl.col("record_count").sum(), line_count=pl.col("line_count").sum(),
        started_at=pl.col("started_at").min(), ended_at=pl.col("ended_at").max(),
        cwds=pl.col("cwds").list.explode(keep_nulls=False, empty_as_null=False).unique(maintain_order=True),
        stream_meta=pl.col("stream_meta").drop_nulls().first(),
    )
    frame = merged.select(
        "session_key", session_id="session_key", stream_kind="stream_kind", parent_session_id="parent_session_id",
        agent=pl.lit(AGENT), producer_method=pl.lit("converter"), producer_source=pl.lit(FORMAT),
        content_level="content_level",  # redacted for a copy an Entire checkpoint holds
        started_at=pl.col("started_at").dt.convert_time_zone("UTC"),
        ended_at=pl.col("ended_at").dt.convert_time_zone("UTC"),
        cwd="cwd", cwds="cwds", git_branch="git_branch",
        versions=pl.col("versions").list.drop_nulls(), client_name="originator",
        source_files="source_files", forked_from_session_id="forked_from_id",
        record_count="record_count", line_count="line_count",
        meta=pl.struct("meta_text", "enveloped", "stream_meta").map_elements(_meta, return_dtype=pl.String),
    )
    return shaped(frame, WORK_SCHEMAS["session_streams"])


def _meta(row: dict) -> str | None:
    """The stream's _meta: the first session_meta's fields the sessions columns have no place for
    (originator, cli_version, model_provider, git, source, ...), under com.openai.codex/session_meta;
    base_instructions and instructions (the system prompt, tens of KB) stay in the record's native JSON.
    One call per stream, not per line."""
    meta = json.loads(row["stream_meta"]) if row["stream_meta"] else {}  # the stream's own (io.entire/checkpoint)
    obj = json.loads(row["meta_text"]) if row["meta_text"] is not None else None
    payload = obj.get("payload", obj) if isinstance(obj, dict) and row["enveloped"] else obj
    if isinstance(payload, dict):
        kept = {k: v for k, v in payload.items() if k not in ("base_instructions", "instructions", "dynamic_tools")}
        meta["com.openai.codex/session_meta"] = kept
    return json.dumps(meta, ensure_ascii=False, sort_keys=True) if meta else None


def lineage_evidence(every: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """A fork names its parent thread in its first session_meta (forked_from_id, 0.88+, §10). A
    spawning thread names the subagent thread it started, with the call: the output of a
    `spawn_agent` call (`{"agent_id": ...}`), a `collab_agent_spawn_end` event (`new_thread_id`) or a
    paginated thread's CollabAgentToolCall item (`receiver_thread_ids`). The parent is the thread the
    line was written in (a forked child's replay of its parent's lines names the parent, not the child)."""
    first = every.filter(pl.col("line_type") == "session_meta").group_by("file_idx").agg(pl.all().first())
    forks = first.filter(pl.col("forked_from_id").is_not_null()).select(
        child_session_key="session_key", relation=pl.lit("forked_from"), parent_session_key="forked_from_id",
        source=pl.lit("session_meta.forked_from_id"),
    )
    ok = every.filter(pl.col("ok"))
    parent = pl.coalesce("thread", "session_key")
    events = ok.filter(pl.col("spawned_thread").is_not_null()).select(
        child_session_key="spawned_thread", relation=pl.lit("spawned_by"), parent_session_key=parent,
        call_id="call_id", source=pl.lit("collab_agent_spawn_end.new_thread_id"),
    )
    calls = ok.filter((pl.col("payload_type") == "function_call") & (pl.col("tool_name") == "spawn_agent")).select(
        "file_idx", "call_id").unique()
    outputs = ok.filter(pl.col("payload_type") == "function_call_output").join(calls, on=["file_idx", "call_id"]).select(
        child_session_key=pl.col("output_text").str.json_path_match("$.agent_id"), relation=pl.lit("spawned_by"),
        parent_session_key=parent, call_id="call_id", source=pl.lit("spawn_agent.agent_id"),
    ).filter(pl.col("child_session_key").is_not_null())
    spawns = items.lineage_rows(every, turn_items)  # a paginated thread's CollabAgentToolCall items of spawn_agent calls
    frame = pl.concat([shaped(f, WORK_SCHEMAS["lineage_evidence"]) for f in (forks, events, outputs, spawns)])
    return frame.unique(maintain_order=True)


def source_losses(every: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Encrypted reasoning; shell calls with an output but no exit code read from it or from an
    exec_command_end (a process still running when the call returned has none yet: not counted)."""
    # a paginated thread's reasoning is its Reasoning item's record; the encrypted content is on its response copy
    held = pl.col("is_record") | (pl.col("reason") == "response_copy")
    encrypted = every.filter(held & pl.col("has_encrypted")).group_by("session_key").len("count") \
        .select("session_key", category=pl.lit("reasoning_encrypted"), detail=pl.lit(ENCRYPTED_DETAIL), count="count")
    unread = calls.filter(
        (pl.col("tool_kind") == "execute") & pl.col("result_record_id").is_not_null() & pl.col("exit_code").is_null()
        & ~pl.col("still_running").fill_null(False)
    ).group_by("session_key").len("count").select(
        "session_key", category=pl.lit("shell_exit_code"), detail=pl.lit(EXIT_CODE_DETAIL), count="count"
    )
    frame = pl.concat([encrypted, unread]).with_columns(pl.col("count").cast(pl.Int64)).sort("session_key", "category")
    return shaped(frame, WORK_SCHEMAS["source_losses"])


def shaped(frame: pl.DataFrame, schema, keep: list[str] = ()) -> pl.DataFrame:
    """The frame with exactly the schema's columns and types (absent columns null), plus `keep`."""
    target = pl.from_arrow(schema.empty_table())
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in target.schema.items() if name not in frame.columns]
    return frame.with_columns(missing).select(*target.columns, *keep).cast(target.schema)
