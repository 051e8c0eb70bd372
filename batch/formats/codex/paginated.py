"""The fate of the lines of a paginated thread (reference §14.3 to §14.5): which line is the record of
a fact Codex writes twice, and the kind, author and origin of the newer line kinds.

A rollout whose first session_meta says `history_mode: "paginated"` writes the human's prompt, the
assistant's reply and the reasoning as `item_completed` TurnItems (`UserMessage`, `AgentMessage`,
`Reasoning`) and still writes their model-visible `response_item` copies (§14.3). The item is the
record; its response item is a duplicate of it in source_lines (reason `response_copy`). No ID ties
them: the n-th item of a kind pairs with the n-th response item of that kind with the same text in
the file; an assistant or reasoning item left over (texts redacted differently) pairs with the n-th
left-over response item of its kind in the same turn. A user item pairs by text only, since Codex's
injected context is also a user message.

A tool call is the other way round (§14.3 table: response pairs or tool items, not both): the model's
`response_item` call and its output stay the call and its result, as in a legacy file, and a tool
item naming the call (its `id` is the call's `call_id`, a web search's the call's `id`) is a
duplicate of the result's record (reason `item_copy`; of the call's when it has no output), from
which tables.calls reads the outcome (exit code, run time, status). A tool item no response call
names (a user's shell command) is a call of its own. A `ContextCompaction` item is the compaction
the `compacted` line before it records (no other ContextCompaction between): a duplicate of it;
alone, it is the compaction. An inter-agent `response_item` agent_message repeating an
`inter_agent_communication` line of the file (same author, recipient and text) is its copy.

The mapping of the newer kinds applies to paginated files: the mapping of a legacy file, whatever
lines it holds, is today's (docs/asr-tables.md, Codex rollouts).

The TurnItems are a frame of their own (`turn_items`: file_idx, line, item; sql/batch/codex/codex_items.sql),
joined to the few lines that read them: the lines of a batch carry only `item_type`, since a struct of
the item's fields on every line would cost every later step over the lines.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl

# item_completed TurnItems that are a text written twice (§14.3), by the response item kind they copy
MESSAGE_ITEMS = {"UserMessage": "user", "AgentMessage": "assistant", "Reasoning": "reasoning"}
# TurnItems that describe a tool call (§14.3): a copy of the response call naming them, else a call
TOOL_ITEMS = ("CommandExecution", "McpToolCall", "FileChange", "WebSearch", "CollabAgentToolCall", "DynamicToolCall")
# response items of paginated threads that are calls and results (§14.4)
SEARCH_CALL, SEARCH_OUTPUT = "tool_search_call", "tool_search_output"
RESPONSE_COPY, ITEM_COPY = "response_copy", "item_copy"
NO_COPY = ("pcopy_of", "pcopy_reason", "item_call_key", "item_call_name")  # copies' string columns


def item_type() -> pl.Expr:
    return pl.col("item_type")


def item_field(name: str) -> pl.Expr:
    return pl.col("item").struct.field(name)


def _is_item(*types: str) -> pl.Expr:
    return (pl.col("line_type") == "event_msg") & (pl.col("payload_type") == "item_completed") \
        & item_type().is_in(list(types))


def _is_response(*types: str) -> pl.Expr:
    return (pl.col("line_type") == "response_item") & pl.col("payload_type").is_in(list(types))


def with_items(frame: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` that are item_completed lines, with their TurnItem (`item`)."""
    return frame.join(turn_items, on=["file_idx", "line"], how="inner", maintain_order="left")


def copies(frame: pl.DataFrame, turn_items: pl.DataFrame, *, calls: Collection[str], results: Collection[str]
           ) -> pl.DataFrame:
    """The lines with pcopy_of (the own_id of the record a line of a paginated file repeats) and
    pcopy_reason; a tool item's item_call_key (the tool_calls call_id it describes), item_call_name
    (that call's tool name) and is_user_shell. `turn_items`: the TurnItems of the lines (file_idx,
    line, item); `calls`, `results`: the response item types that are calls and results in every file
    (classify.CALLS, RESULTS)."""
    if not frame["is_paginated"].any():  # a batch of legacy files: nothing to pair
        return frame.with_columns(pl.lit(None, pl.String).alias(c) for c in NO_COPY).with_columns(
            is_user_shell=pl.lit(False))
    frame = frame.with_columns(_turn=pl.col("turn_id").forward_fill().over("file_idx").fill_null(""))
    found = [_message_copies(frame, turn_items), _tool_copies(frame, turn_items, calls, results),
             _compaction_copies(frame), _inter_agent_copies(frame)]
    pairs = pl.concat([f for f, _ in found], how="diagonal_relaxed")
    keys = found[1][1]
    return (
        frame.join(pairs, on=["file_idx", "line"], how="left", maintain_order="left")
        .join(keys, on=["file_idx", "line"], how="left", maintain_order="left")
        .drop("_turn")
    )


def _message_copies(frame: pl.DataFrame, turn_items: pl.DataFrame) -> tuple[pl.DataFrame, None]:
    ok = pl.col("ok") & pl.col("is_paginated")
    texts = item_field("content").list.eval(pl.element().struct.field("text")).list.drop_nulls().list.join("\n")
    items = with_items(frame.filter(ok & _is_item(*MESSAGE_ITEMS)), turn_items).select(
        "file_idx", "own_id", "_turn",
        kind=item_type().replace_strict(MESSAGE_ITEMS, return_dtype=pl.String),
        text=pl.when(item_type() == "Reasoning").then(item_field("summary_text").list.join("\n")).otherwise(texts),
    )
    role = pl.col("role")
    responses = frame.filter(
        ok & (((pl.col("payload_type") == "message") & role.is_in(["user", "assistant"])) | _is_response("reasoning"))
        & (pl.col("line_type") == "response_item")
    ).select(
        "file_idx", "line", "_turn",
        kind=pl.when(pl.col("payload_type") == "reasoning").then(pl.lit("reasoning")).otherwise(role),
        text=pl.when(pl.col("payload_type") == "reasoning")
        .then(pl.col("summary_texts").list.drop_nulls().list.join("\n")).otherwise("item_text"),
    )
    items, responses = (f.with_columns(pl.col("text").fill_null("")) for f in (items, responses))
    # the n-th of a kind and text in the file, then the n-th left over of a kind in the turn
    by_text = ["file_idx", "kind", "text"]
    first = _nth(items, by_text).join(_nth(responses, by_text), on=[*by_text, "n"]).select("file_idx", "line", "own_id")
    items = items.join(first, on="own_id", how="anti").filter(pl.col("kind") != "user")
    responses = responses.join(first, on=["file_idx", "line"], how="anti")
    by_turn = ["file_idx", "kind", "_turn"]
    second = _nth(items, by_turn).join(_nth(responses, by_turn), on=[*by_turn, "n"]) \
        .select("file_idx", "line", "own_id")
    return pl.concat([first, second]).select(
        "file_idx", "line", pcopy_of="own_id", pcopy_reason=pl.lit(RESPONSE_COPY)
    ), None


def _nth(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The frame (in file order) with n: the 0-based rank of each row among the rows of its keys."""
    return frame.with_columns(n=pl.int_range(pl.len()).over(keys))


def _tool_copies(frame: pl.DataFrame, turn_items: pl.DataFrame, calls: Collection[str], results: Collection[str]
                 ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Tool items named by a response call of the file are copies of the call's result (or of the
    call); every tool item's call key and name. A FunctionCallOutput item is a copy of the output it
    repeats."""
    ok = pl.col("ok") & pl.col("is_paginated")
    calls = frame.filter(ok & _is_response(*calls, SEARCH_CALL)).select(
        "file_idx", key=pl.coalesce("call_id", "meta_id"), call_own_id="own_id",
        item_call_key=pl.coalesce("call_id", "position"), item_call_name="tool_name",
    ).filter(pl.col("key").is_not_null()).unique(["file_idx", "key"], keep="first", maintain_order=True)
    outputs = frame.filter(ok & _is_response(*results, SEARCH_OUTPUT) & pl.col("call_id").is_not_null()).select(
        "file_idx", key="call_id", output_own_id="own_id",
    ).unique(["file_idx", "key"], keep="first", maintain_order=True)
    items = with_items(frame.filter(ok & _is_item(*TOOL_ITEMS)), turn_items).select(
        "file_idx", "line", "position", key=item_field("id"),
        is_user_shell=(item_field("source") == "userShell").fill_null(False),
        own_name=pl.when(item_type() == "McpToolCall")
        .then(pl.format("mcp__{}__{}", item_field("server"), item_field("tool")))
        .when(item_type().is_in(["CollabAgentToolCall", "DynamicToolCall"])).then(item_field("tool"))
        .otherwise(item_type()),
    ).join(calls, on=["file_idx", "key"], how="left").join(outputs, on=["file_idx", "key"], how="left")
    paired = items.filter(pl.col("call_own_id").is_not_null()).select(
        "file_idx", "line", pcopy_of=pl.coalesce("output_own_id", "call_own_id"), pcopy_reason=pl.lit(ITEM_COPY),
    )
    keys = items.select(
        "file_idx", "line",
        item_call_key=pl.coalesce("item_call_key", "key", "position"),
        item_call_name=pl.when(pl.col("call_own_id").is_not_null()).then("item_call_name").otherwise("own_name"),
        is_user_shell="is_user_shell",
    )
    outputs_repeated = with_items(frame.filter(ok & _is_item("FunctionCallOutput")), turn_items).select(
        "file_idx", "line", key=item_field("id"),
    ).join(outputs, on=["file_idx", "key"]).select(
        "file_idx", "line", pcopy_of="output_own_id", pcopy_reason=pl.lit(ITEM_COPY),
    )
    return pl.concat([paired, outputs_repeated]), keys


def _compaction_copies(frame: pl.DataFrame) -> tuple[pl.DataFrame, None]:
    """A ContextCompaction item after a `compacted` line, with no ContextCompaction between, repeats it."""
    marker = pl.col("ok") & pl.col("is_paginated") & _is_item("ContextCompaction")
    compacted = pl.col("ok") & (pl.col("line_type") == "compacted")

    def before(condition: pl.Expr, value: str) -> pl.Expr:
        return pl.when(condition).then(pl.col(value)).shift(1).forward_fill().over("file_idx")

    frame = frame.select(
        "file_idx", "line", marker=marker,
        compacted_line=before(compacted, "line"), compacted_id=before(compacted, "own_id"),
        marker_line=before(marker, "line"),
    )
    return frame.filter(
        pl.col("marker") & pl.col("compacted_line").is_not_null()
        & (pl.col("marker_line").is_null() | (pl.col("compacted_line") > pl.col("marker_line")))
    ).select("file_idx", "line", pcopy_of="compacted_id", pcopy_reason=pl.lit(ITEM_COPY)), None


def _inter_agent_copies(frame: pl.DataFrame) -> tuple[pl.DataFrame, None]:
    """The n-th agent_message response item of an author, recipient and text repeats the n-th
    inter_agent_communication line of the same in the file."""
    ok = pl.col("ok") & pl.col("is_paginated")
    keys = ["file_idx", "message_author", "message_recipient", "message_text"]
    sent = frame.filter(ok & (pl.col("line_type") == "inter_agent_communication")).select(*keys, "own_id")
    repeated = frame.filter(ok & _is_response("agent_message")).select(*keys, "line")
    pairs = _nth(sent, keys).join(_nth(repeated, keys), on=[*keys, "n"])
    return pairs.select("file_idx", "line", pcopy_of="own_id", pcopy_reason=pl.lit(RESPONSE_COPY)), None


def is_inter_agent() -> pl.Expr:
    return (pl.col("line_type") == "inter_agent_communication") | _is_response("agent_message")


def kinds(frame: pl.DataFrame) -> pl.DataFrame:
    """The records of a paginated file's items and newer kinds with their kind, author and origin (the
    legacy classification left them unknown); from_address of inter-agent messages; the turn of a
    line after inherited context, its own."""
    if not frame["is_paginated"].any():
        return frame.with_columns(from_address=pl.lit(None, pl.String))
    event = pl.col("line_type") == "event_msg"
    user_shell = pl.col("is_user_shell")
    rules = [
        (_is_item("UserMessage"), "message", "human", "prompt"),
        (_is_item("AgentMessage", "Reasoning", "Plan"), "message", "model", None),
        (_is_item("ContextCompaction"), "compaction", "harness", "compaction"),
        (_is_item("SubAgentActivity"), "subagent", "harness", None),
        (_is_item(*TOOL_ITEMS) & user_shell.fill_null(False), "message", "human", None),
        (_is_item(*TOOL_ITEMS), "message", "model", None),
        (pl.col("line_type") == "world_state", "attachment", "harness", "injected"),
        (is_inter_agent(), "message", "agent", "inter_session"),
        ((event & (pl.col("payload_type") == "thread_settings_applied")) | _is_response("configuration_update"),
         "config_change", "harness", None),
        (event & (pl.col("payload_type") == "thread_goal_updated"), "session_info", "harness", None),
        (_is_response(SEARCH_CALL), "message", "model", None),
        (_is_response(SEARCH_OUTPUT), "tool_result", "tool", "tool"),
    ]
    mapped = pl.col("is_record") & pl.col("is_paginated")
    kind, author, origin = pl.col("kind"), pl.col("author"), pl.col("origin")
    for condition, k, a, o in reversed(rules):
        hit = mapped & condition.fill_null(False)
        kind = pl.when(hit).then(pl.lit(k)).otherwise(kind)
        author = pl.when(hit).then(pl.lit(a)).otherwise(author)
        origin = pl.when(hit).then(pl.lit(o, pl.String)).otherwise(origin)
    # lines after inherited context are in their own turn, not the last inherited one's
    own_turn = pl.coalesce(
        "end_turn_id", pl.when(~pl.col("is_inherited")).then("turn_id").forward_fill().over("file_idx"))
    inherits = pl.col("is_inherited").any().over("file_idx")
    return frame.with_columns(
        kind=kind, author=author, origin=origin,
        from_address=pl.when(mapped & is_inter_agent()).then("message_author"),
        turn=pl.when(inherits & ~pl.col("is_inherited")).then(own_turn).otherwise("turn"),
    )
