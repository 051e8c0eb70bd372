"""convert(): a batch of Codex rollout streams -> frames of the output and work tables."""

from __future__ import annotations

from concurrent.futures import Executor

import duckdb
import polars as pl

from batch import sql
from batch.formats.base import Converted
from batch.formats.codex import classify, items, rollouts, tables, usage
from batch.formats.lines import LINE_TOO_LONG, read_lines
from batch.schema.plans import PLANS
from batch.schema.workspace import FILE_CHANGES
from batch.sources.base import Stream
from batch.sources.claude_code import NO_TOOL_RESULTS, ToolResults
from batch.sources.codex import FORMAT, rollout_id

__all__ = ["FORMAT", "convert"]


def convert(
    con: duckdb.DuckDBPyConnection, streams: list[Stream], *, tool_results: ToolResults = NO_TOOL_RESULTS,
    hasher: Executor | None = None,
) -> Converted:
    """Map every line of each rollout file (one stream per file) into frames."""
    read = read_lines(streams, hasher)
    lines = read.lines.filter(~pl.col("text").str.contains(r"^\s*$"))
    # a batch converted again after running out of memory: a line longer than the limit is rejected
    # undecoded, its bytes kept (as the Claude Code converter does)
    max_line = sql.max_line(con)
    too_long = pl.lit(False) if max_line is None else pl.col("byte_length") > max_line
    sql.register(con, "codex_input", lines.select("file_idx", "line", text=pl.when(~too_long).then("text")))
    try:
        decoded = sql.frame(con, "codex_lines")
    finally:
        con.unregister("codex_input")
    decoded, turn_items = _items(con, decoded)
    blocks = _blocks(decoded)
    decoded = decoded.drop("blocks")
    heads, usage_records = _facts(con, lines, decoded)
    files = pl.DataFrame(
        {"file_idx": range(len(streams)), "source_file": [s.name for s in streams],
         "session_key": [s.session_key for s in streams], "content_level": [s.content_level for s in streams],
         "rollout": [rollout_id(s.name, s.session_key) for s in streams]},
        schema={"file_idx": pl.Int32, "source_file": pl.String, "session_key": pl.String, "content_level": pl.String,
                "rollout": pl.String},
    )
    files = rollouts.plan(files.join(heads, on="file_idx", how="left", maintain_order="left"))
    every = classify.lines(
        lines.select("file_idx", "line", "byte_offset", "byte_length", "text", "raw")
        .join(decoded, on=["file_idx", "line"], how="left", maintain_order="left")
        .join(files, on="file_idx", how="left")
        .with_columns(
            reason=pl.when(too_long).then(pl.lit(LINE_TOO_LONG)).otherwise("reason"),
            detail=pl.when(too_long).then(pl.format(
                "a line of {} bytes needs more memory than this run may use (--memory-mb)", pl.col("byte_length")
            )).otherwise("detail"),
        ),
        turn_items,
    )
    every = usage.select(rollouts.mark(every), usage_records)
    records = tables.records(every)
    parts = tables.parts(every, blocks, turn_items)
    calls = tables.calls(every, turn_items)
    out = {
        "records": records,
        "parts": parts,
        "compactions": tables.compactions(records, every),
        "source_lines": tables.source_lines(every),
        "rejects": tables.rejects(every),
        "tool_calls": tables.tool_calls(calls),
        "session_events": tables.session_events(records, every),
        "inference_candidates": usage.candidates(
            tables.inference_candidates(every), usage.record_candidates(every), records
        ),
        "session_streams": rollouts.session_streams(tables.session_streams(every, streams), every),
        "lineage_evidence": pl.concat([tables.lineage_evidence(every, turn_items), rollouts.lineage_evidence(every)]),
        "source_losses": tables.source_losses(every, calls),
        "first_prompts": _first_prompts(con, records, parts),
        # a paginated thread's FileChange and Plan items (items.py)
        "file_changes": _file_changes(con, items.file_change_items(every, turn_items, records)),
        "plans": tables.shaped(items.plans(every, turn_items), PLANS.schema),
    }
    return Converted(out, _inputs(streams, read, lines, every), [
        (s.name, error) for s, error in zip(streams, read.errors) if error is not None
    ])


def _facts(con: duckdb.DuckDBPyConnection, lines: pl.DataFrame, decoded: pl.DataFrame) -> tuple[pl.DataFrame, ...]:
    """What the first session_meta of each file says of the history it continues (sql/batch/codex/codex_rollouts.sql)
    and the usage of each token_usage_record line (sql/batch/codex/codex_usage_records.sql): those few lines
    decoded a second time, for the fields codex_lines does not read."""
    kinds = decoded.filter(pl.col("line_type").is_in(["session_meta", "token_usage_record"])).select(
        "file_idx", "line", "line_type"
    )
    sql.register(con, "codex_fact_lines", kinds.join(lines.select("file_idx", "line", "text"), on=["file_idx", "line"]))
    try:
        return sql.frame(con, "codex_rollouts"), sql.frame(con, "codex_usage_records")
    finally:
        con.unregister("codex_fact_lines")


def _items(con: duckdb.DuckDBPyConnection, decoded: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The decoded lines with `item_type` in place of the TurnItem's JSON, and the TurnItems of the
    item_completed lines (file_idx, line, item), decoded for those lines alone (sql/batch/codex/codex_items.sql)
    and kept apart: a struct column on every line would weigh on every step over the lines."""
    sql.register(con, "codex_item_lines", decoded.filter(pl.col("item_json").is_not_null())
                 .select("file_idx", "line", "item_json"))
    try:
        turn_items = sql.frame(con, "codex_items")
    finally:
        con.unregister("codex_item_lines")
    types = turn_items.select("file_idx", "line", item_type=pl.col("item").struct.field("type"))
    lines = decoded.drop("item_json").join(types, on=["file_idx", "line"], how="left", maintain_order="left")
    return lines, turn_items


def _first_prompts(con: duckdb.DuckDBPyConnection, records: pl.DataFrame, parts: pl.DataFrame) -> pl.DataFrame:
    """Each stream's first prompt, by the statement the Claude Code converter runs (sql/batch/sessions/first_prompts.sql)."""
    sql.register(con, "records_full", records)
    sql.register(con, "batch_parts", parts)
    try:
        return sql.frame(con, "first_prompts")
    finally:
        con.unregister("records_full")
        con.unregister("batch_parts")


def _file_changes(con: duckdb.DuckDBPyConnection, changed: pl.DataFrame) -> pl.DataFrame:
    """One row per path a FileChange item changed (sql/batch/codex/codex_file_changes.sql)."""
    sql.register(con, "codex_file_change_items", changed)
    try:
        return tables.shaped(sql.frame(con, "codex_file_changes"), FILE_CHANGES.schema)
    finally:
        con.unregister("codex_file_change_items")


def _blocks(decoded: pl.DataFrame) -> pl.DataFrame:
    """One row per content block of a message item (`content[]`) and per summary entry of a reasoning
    item (`summary[]`): the parts of their records, with the native path of each; and of a paginated
    thread's inter-agent agent_message item (`content[]`, paginated.py)."""
    inter_agent = pl.col("payload_type") == "agent_message"
    items = decoded.filter(pl.col("blocks").is_not_null() & (~inter_agent | pl.col("is_paginated"))).select(
        "file_idx", "line", "blocks", item_type="payload_type",
        block_index=pl.int_ranges(pl.col("blocks").list.len(), dtype=pl.Int64),
        path=pl.when(pl.col("enveloped")).then(pl.lit("$.payload")).otherwise(pl.lit("$"))
        + pl.when(pl.col("payload_type") == "reasoning").then(pl.lit(".summary[")).otherwise(pl.lit(".content[")),
    )
    return items.explode("blocks", "block_index").filter(pl.col("block_index").is_not_null()).select(
        "file_idx", "line", "block_index", "item_type",
        block_type=pl.col("blocks").struct.field("type"), text=pl.col("blocks").struct.field("text"),
        image_url=pl.col("blocks").struct.field("image_url"),
        native_path=pl.col("path") + pl.col("block_index").cast(pl.String) + "]",
    )


def _inputs(streams: list[Stream], read, lines: pl.DataFrame, every: pl.DataFrame) -> list[dict]:
    """The manifest's entry of each stream read."""
    counts = dict(lines.group_by("file_idx").len().iter_rows())
    physical = dict(read.lines.group_by("file_idx").len().iter_rows())
    # the version of the file's own (first) session_meta: later ones are copies of other threads' (§10)
    versions = dict(
        every.filter(pl.col("line_type") == "session_meta")
        .group_by("file_idx", maintain_order=True).agg(pl.col("cli_version").first().implode().list.drop_nulls())
        .iter_rows()
    )
    return [
        {
            "path": s.name, "size": read.sizes[i], "sha256": read.digests[i].result(),
            "session_key": s.session_key, "stream_kind": s.stream_kind,
            "lines": counts.get(i, 0), "versions": versions.get(i, []), "format": FORMAT,
            "blank_lines": physical.get(i, 0) - counts.get(i, 0),
            "status": "empty" if read.sizes[i] == 0 else "converted",
            **({"byte_order_mark": True} if read.boms[i] else {}),
        }
        for i, s in enumerate(streams)
        if read.errors[i] is None
    ]
