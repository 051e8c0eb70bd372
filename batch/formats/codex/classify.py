"""Each decoded rollout line's fate: a record with its kind, author and origin, a duplicate, or a reject.

Copies (reference §6, §12.5): each assistant text is a `response_item` message and an `event_msg`
agent_message, each typed prompt a user `message` item and a `user_message` event, each reasoning
summary entry a `reasoning` item's summary and an `agent_reasoning` event. The item is the record;
the event is a duplicate of it in source_lines. No ID ties them: an event pairs with the nearest
response item before or after it (only events between), of the matching kind, whose text holds the
event's text; failing that (texts redacted, as in sanitized files), with the one on the side Codex
writes it (agent_message and agent_reasoning before their item, user_message after it). An event
that pairs with no item is a record of its own.
A token_count whose usage pair an earlier token_count of the file has (a re-emit, §9.3) is a
duplicate of that one's record.
One session can be read from two copies of its rollout: the file and the copy an Entire checkpoint
holds (a prefix of it, redacted). One copy is kept (`stream_rank` 0: full before redacted, then the
longer, then by name); a line of another copy at a position the kept copy holds is a duplicate of the
record there (reason `stream_copy`), and its lines past the kept copy's end are records.
A paginated thread (§14.3) writes its texts as item_completed items beside their response items, and
its tool items beside the response calls: paginated.py says which line of each is the record.
"""

from __future__ import annotations

import polars as pl

from batch.formats.codex import paginated

# event_msg copies: the kind of item each repeats, and the side it is written on
COPIES = {"user_message": "user", "agent_message": "assistant", "agent_reasoning": "reasoning"}
FORWARD = {"agent_message", "agent_reasoning"}  # written before their item: pair with the next one
KINDS = {
    "session_meta": "session_info",
    "turn_context": "config_change",
    "compacted": "compaction",
}
TOKEN_COUNT_KIND = "com.openai.codex/token_count"
USAGE_RECORD_KIND = "com.openai.codex/token_usage_record"  # one response's usage (formats/codex/usage.py)
# turns (§8): a start sets the state running, as an Entire TurnStart does; an end is the turn's
# statistics, as Claude Code's turn_duration line (its duration_ms, from 0.156), and sets it idle
TURN_STARTS = {"task_started": "running", "turn_started": "running"}
TURN_ENDS = {"task_complete": "idle", "turn_complete": "idle", "turn_aborted": "idle"}
CALLS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
RESULTS = {"function_call_output", "custom_tool_call_output"}


def lines(frame: pl.DataFrame, turn_items: pl.DataFrame) -> pl.DataFrame:
    """The batch's lines (decoded, with source_file and session_key) with their fate:
    is_record, kind, author, origin, record_id, status, reason, dup_of. `turn_items`: the TurnItem of
    each item_completed line (paginated.py)."""
    frame = frame.sort("file_idx", "line").with_columns(
        ok=pl.col("reason").is_null(),
        # a thread's later rollout (thread/revert, rollouts.py) numbers its lines apart from the first's
        position=pl.when(pl.col("rollout") != pl.col("session_key")).then(pl.lit("rollout:") + pl.col("rollout") + ":")
        .otherwise(pl.lit("")) + "line:" + pl.col("line").cast(pl.String),
    ).with_columns(
        own_id=pl.col("session_key") + ":" + pl.col("position"),
    )
    frame = _pair_copies(frame)
    frame = _repeats(frame)
    frame = paginated.copies(frame, turn_items, calls=CALLS, results=RESULTS)
    dup = pl.col("copy_of").is_not_null() | pl.col("repeat_of").is_not_null() | pl.col("pcopy_of").is_not_null()
    frame = frame.with_columns(
        is_record=pl.col("ok") & ~dup,
        status=pl.when(~pl.col("ok")).then(pl.lit("rejected")).when(dup).then(pl.lit("duplicate"))
        .otherwise(pl.lit("mapped")),
        reason=pl.when(pl.col("copy_of").is_not_null()).then(pl.lit("event_copy"))
        .when(pl.col("repeat_of").is_not_null()).then(pl.lit("token_count_repeat"))
        .when(pl.col("pcopy_of").is_not_null()).then("pcopy_reason")
        .otherwise("reason"),
    ).with_columns(
        record_id=pl.when(pl.col("is_record")).then("own_id")
        .otherwise(pl.coalesce("copy_of", "repeat_of", "pcopy_of")),
    )
    return paginated.kinds(_kinds(_stream_copies(frame)))


def _stream_copies(frame: pl.DataFrame) -> pl.DataFrame:
    """stream_rank of each line's copy of its rollout; a line of a copy that is not kept, at a
    position the kept copy holds, becomes a duplicate of the kept line's record. Two rollouts of one
    thread (thread/revert) are no copies of each other."""
    ranks = (
        frame.group_by("file_idx").agg(pl.first("session_key"), pl.first("rollout"), pl.first("content_level"),
                                       pl.first("source_file"), n=pl.len())
        .sort(pl.col("content_level") != "full", pl.col("n"), "source_file", descending=[False, True, False])
        .select("file_idx", stream_rank=pl.int_range(pl.len()).over("session_key", "rollout"))
    )
    frame = frame.join(ranks, on="file_idx", how="left", maintain_order="left")
    if frame["stream_rank"].max() == 0:
        return frame
    kept = frame.filter(pl.col("stream_rank") == 0).select("session_key", "rollout", "line", _kept_record="record_id")
    frame = frame.join(kept, on=["session_key", "rollout", "line"], how="left", maintain_order="left")
    copy = (pl.col("stream_rank") > 0) & pl.col("_kept_record").is_not_null()
    return frame.with_columns(
        is_record=pl.col("is_record") & ~copy,
        status=pl.when(copy).then(pl.lit("duplicate")).otherwise("status"),
        reason=pl.when(copy).then(pl.lit("stream_copy")).otherwise("reason"),
        record_id=pl.when(copy).then("_kept_record").otherwise("record_id"),
    ).drop("_kept_record")


def _item_kind() -> pl.Expr:
    ptype, role = pl.col("payload_type"), pl.col("role")
    return (
        pl.when((pl.col("line_type") != "response_item") | ~pl.col("ok")).then(None)
        .when((ptype == "message") & (role == "user")).then(pl.lit("user"))
        .when((ptype == "message") & (role == "assistant")).then(pl.lit("assistant"))
        .when(ptype == "reasoning").then(pl.lit("reasoning"))
        .otherwise(pl.lit("other"))
    )


def _pair_copies(frame: pl.DataFrame) -> pl.DataFrame:
    """copy_of: the record_id of the response item an event_msg copy repeats (null otherwise)."""
    is_item = _item_kind().is_not_null()
    item_text = pl.when(pl.col("payload_type") == "reasoning").then(pl.col("summary_texts").list.join("\n")) \
        .otherwise(pl.col("item_text"))
    frame = frame.with_columns(
        _ik=_item_kind(), _it=pl.when(is_item).then(item_text), _il=pl.when(is_item).then(pl.col("own_id")),
        _ck=pl.when((pl.col("line_type") == "event_msg") & pl.col("ok"))
        .then(pl.col("payload_type").replace_strict(COPIES, default=None, return_dtype=pl.String)),
    )
    near = []
    for side, fill in (("prev", "forward_fill"), ("next", "backward_fill")):
        shift = 1 if side == "prev" else -1
        near += [
            getattr(pl.col(c).shift(shift), fill)().over("file_idx").alias(f"_{side}{c[2:]}")
            for c in ("_ik", "_it", "_il")
        ]
    frame = frame.with_columns(near)
    text = pl.col("event_text")

    def holds(side: str) -> pl.Expr:
        return (pl.col(f"_{side}k") == pl.col("_ck")) & pl.col(f"_{side}t").str.contains(text, literal=True).fill_null(False)

    def kind_is(side: str) -> pl.Expr:
        return (pl.col(f"_{side}k") == pl.col("_ck")).fill_null(False)

    forward = pl.col("payload_type").is_in(list(FORWARD))
    copy_of = (
        pl.when(pl.col("_ck").is_null()).then(None)
        .when(holds("prev") & ~(forward & holds("next"))).then("_prevl")
        .when(holds("next")).then("_nextl")
        .when(forward & kind_is("next")).then("_nextl")
        .when(~forward & kind_is("prev")).then("_prevl")
    )
    frame = frame.with_columns(copy_of=copy_of)
    # a user item whose typed prompt an event repeats is the human's prompt
    prompts = frame.filter(pl.col("payload_type") == "user_message").get_column("copy_of").drop_nulls()
    return frame.with_columns(is_prompt=pl.col("own_id").is_in(prompts.implode()))


def _repeats(frame: pl.DataFrame) -> pl.DataFrame:
    """repeat_of: for a token_count repeating an earlier line's usage pair in its file, that line's record_id."""
    first = pl.col("own_id").first().over("file_idx", "usage_key")
    return frame.with_columns(
        repeat_of=pl.when(pl.col("usage_key").is_not_null() & (first != pl.col("own_id"))).then(first)
    )


def _kinds(frame: pl.DataFrame) -> pl.DataFrame:
    ltype, ptype, role = pl.col("line_type"), pl.col("payload_type"), pl.col("role")
    item = ltype == "response_item"
    event = ltype == "event_msg"
    kind = (
        pl.when(~pl.col("is_record")).then(None)
        .when(ltype.is_in(list(KINDS))).then(ltype.replace_strict(KINDS, default=None, return_dtype=pl.String))
        .when(item & ptype.is_in(["message", "reasoning", *CALLS])).then(pl.lit("message"))
        .when(item & ptype.is_in(list(RESULTS))).then(pl.lit("tool_result"))
        .when(event & ptype.is_in(list(COPIES))).then(pl.lit("message"))
        .when(event & (ptype == "token_count")).then(pl.lit(TOKEN_COUNT_KIND))
        .when(ltype == "token_usage_record").then(pl.lit(USAGE_RECORD_KIND))
        .when(event & ptype.is_in(list(TURN_STARTS))).then(pl.lit("session_info"))
        .when(event & ptype.is_in(list(TURN_ENDS))).then(pl.lit("turn_stats"))
        .otherwise(pl.lit("unknown"))
    )
    model_side = (item & (ptype.is_in(["reasoning", *CALLS]) | (role == "assistant"))) \
        | (event & ptype.is_in(["agent_message", "agent_reasoning"]))
    author = (
        pl.when(pl.col("kind").is_null() | (pl.col("kind") == "unknown")).then(None)
        .when(model_side).then(pl.lit("model"))
        .when(pl.col("is_prompt") | (event & (ptype == "user_message"))).then(pl.lit("human"))
        .when(pl.col("kind") == "tool_result").then(pl.lit("tool"))
        .otherwise(pl.lit("harness"))
    )
    origin = (
        pl.when(pl.col("author") == "human").then(pl.lit("prompt"))
        .when(pl.col("kind") == "tool_result").then(pl.lit("tool"))
        .when(pl.col("kind") == "compaction").then(pl.lit("compaction"))
        .when(item & (ptype == "message") & role.is_in(["user", "developer", "system"])).then(pl.lit("injected"))
    )
    return frame.with_columns(kind=kind).with_columns(author=author).with_columns(origin=origin).with_columns(
        # the state each line was written in: the latest turn, model, working directory and version before it
        turn=pl.coalesce("end_turn_id", pl.col("turn_id").forward_fill().over("file_idx")),
        model=pl.col("context_model").forward_fill().over("file_idx"),
        cwd_now=pl.col("cwd").forward_fill().over("file_idx"),
        version=pl.when(ltype == "session_meta").then("cli_version").forward_fill().over("file_idx"),
    )
