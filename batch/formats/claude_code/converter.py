"""The converter of one batch of Claude Code streams: pass 1, the narrow stage, pass 2, then the
statements of sql/batch/ over the whole batch (see the package's docstring)."""

from __future__ import annotations

from concurrent.futures import Executor

import duckdb
import polars as pl

from batch import sql
from batch.formats.base import Converted
from batch.formats.claude_code import narrow, pass1, pass2
from batch.formats.claude_code import store as stored
from batch.formats.claude_code.store import Store
from batch.formats.lines import LineChunks
from batch.schema import TABLES, TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import Stream
from batch.transforms.elide import Elided

FORMAT = "claude-code-jsonl"
# The batch's output and work tables; those not built by the steps in `convert` are built by the
# sql/batch/<name>.sql files, in the order their `-- reads:` headers give (sql.order).
BATCH_OUTPUTS = (*(t.name for t in TABLES if t.stage == "batch"), *WORK_SCHEMAS)
# Chunks of a batch's observations converted at once by pass 2 of the core (records_full, parts,
# source_lines, number_faults, rejects: pass2.run), by the size of their JSON text, cut where no record's
# live observations are on both sides (pass2.chunk_ends; docs/decisions/005-chunked-sessions.md).
# An ordinary batch is one chunk.
PASS2_CHUNK_BYTES = 64 << 20
# A batch whose streams hold more bytes than this, more than a chunk of pass 2, keeps its wide rows in
# a store (claude_code/store.py) instead of frames held to its end (docs/decisions/006-the-store.md).
STORE_BYTES = PASS2_CHUNK_BYTES


def convert(
    con: duckdb.DuckDBPyConnection, files: list[Stream], *, tool_result_files: set[str], hasher: Executor | None = None
) -> Converted:
    """Convert the Claude Code streams of one batch into frames of the output and work tables."""
    reader = LineChunks(files, hasher)
    sql.register(con, "batch_tool_result_files", pl.DataFrame({"name": sorted(tool_result_files)}, schema={"name": pl.String}))
    files_frame = streams_frame(files)
    sql.register(con, "batch_files", files_frame.with_columns(is_foreign=pl.lit(False)))
    # a batch larger than a chunk of pass 2 keeps its wide rows in a store (claude_code/store.py)
    store = Store(con) if sum(f.size for f in files) > STORE_BYTES else None
    # long strings are elided before the decode and restored in the tables (transforms/elide.py);
    # a batch converted again with its long lines rejected (sql.max_line) decodes its lines whole
    elided = Elided() if sql.max_line(con) is None else None
    decoded = pass1.decode(con, reader, store, elided)
    stage = narrow.run(con, decoded, files_frame, store, PASS2_CHUNK_BYTES)
    folded = pass2.run(
        con, stage.classified, stage.rows_by_ord, stage.ends, decoded.lines, stage.rejects, stage.line_chunks,
        stage.files_frame, stage.foreign, files, store, stage.keys,
    )
    sql.register(con, "batch_lines", decoded.lines)
    sql.register(con, "batch_rejects", stage.rejects)
    tables, per_file = _core_tables(con, stage, folded, store)
    del folded
    _run_steps(con, tables)
    inputs, skipped = _inputs(files, reader, stage, per_file)
    if elided is not None:
        tables = {name: elided.restore(value) for name, value in tables.items()}
    return Converted(tables, inputs, skipped)


def _core_tables(
    con: duckdb.DuckDBPyConnection, stage: narrow.Narrowed, folded: tuple, store: Store | None
) -> tuple[dict[str, pl.DataFrame], dict[str, int]]:
    """The batch's core tables from pass 2's frames (`folded`), registered for the statements after
    it, and the count of source lines per file."""
    number_faults, records, parts, source_lines, rejects_out = folded
    classified, stage.classified = stage.classified, None  # replaced below: its content is freed
    # message.content (decoded, about a fifth of the batch's text) was read by records_full and parts;
    # the later statements read it on compact summaries alone (compactions.sql), as summary_content:
    # a later statement reading classified.content fails by name instead of reading nulls
    if store is not None:  # the same relations over the store; its large tables are read back a piece at a time, sorted
        stored.classified_view(con, summary_content=True)
        stored.tool_calls(con, store)
        tables = {
            "number_faults": number_faults,
            "records": store.merged("records_pieces", pass2.RECORDS_ORDER, TABLES_BY_NAME["records"].names),
            "parts": store.merged("parts_pieces", sql.sorted_by("parts"), TABLES_BY_NAME["parts"].names),
            "tool_calls": store.read("batch_tool_calls"),
            "source_lines": store.merged("source_lines_pieces", sql.sorted_by("source_lines_out")),
            "rejects": rejects_out,
        }
        return tables, dict(con.sql("select source_file, count(*) from batch_source_lines group by source_file").fetchall())
    sql.register(con, "records_full", records)
    sql.register(con, "batch_parts", parts)
    classified = classified.with_columns(summary_content=pl.when(pl.col("is_compact_summary")).then("content")).drop("content")
    sql.register(con, "classified", classified)
    tables = {
        "number_faults": number_faults,
        "records": records.select(TABLES_BY_NAME["records"].names),  # records_full is wider: fact tables read the rest
        # the block's JSON stays in its line (native_path), and source_ord names that line in the batch
        "parts": parts.select(TABLES_BY_NAME["parts"].names),
        "tool_calls": pass2.tool_calls(con, records, parts),
        "source_lines": source_lines,
        "rejects": rejects_out,
    }
    sql.register(con, "batch_source_lines", tables["source_lines"])
    sql.register(con, "batch_tool_calls", tables["tool_calls"])
    return tables, dict(tables["source_lines"].group_by("source_file").len().iter_rows())


def _run_steps(con: duckdb.DuckDBPyConnection, tables: dict[str, pl.DataFrame]) -> None:
    """Add to `tables` the batch's output and work tables that the sql/batch/ statements build."""
    sql_files = set(sql.names())
    targets = [name for name in BATCH_OUTPUTS if name not in tables and name in sql_files]
    steps = sql.order(targets, given=sql.defined(con))
    read = {dep for name in steps for dep in sql.reads(name)}
    for name in steps:
        if name in read:
            # read by later steps: computed once per batch into a temporary table (as a view,
            # every reader planned and ran it again)
            sql.materialize(con, name)
            if name in targets:
                tables[name] = con.table(name).pl()
        else:
            tables[name] = sql.frame(con, name)


def _inputs(
    files: list[Stream], reader: LineChunks, stage: narrow.Narrowed, per_file: dict[str, int]
) -> tuple[list[dict], list[tuple[str, str]]]:
    """The manifest's entry of each stream read, and the streams that could not be read."""
    foreign = set(stage.foreign.to_list())
    inputs = [
        {
            "path": f.name,
            **({"provenance": list(f.provenance)} if f.provenance else {}),
            "size": reader.sizes[i],
            "sha256": reader.digests[i].result(),
            "session_key": f.session_key,
            "stream_kind": f.stream_kind,
            "lines": per_file.get(f.name, 0),
            "versions": stage.versions.get(i, []),
            "blank_lines": stage.blank_counts.get(i, 0),
            "status": "foreign" if i in foreign else ("empty" if reader.sizes[i] == 0 else "converted"),
            **({"byte_order_mark": True} if reader.boms[i] else {}),
        }
        for i, f in enumerate(files)
        if reader.errors[i] is None
    ]
    skipped = [(f.name, error) for f, error in zip(files, reader.errors) if error is not None]
    return inputs, skipped


def streams_frame(files: list[Stream]) -> pl.DataFrame:
    # Several files can hold the same stream (copies of one session): the largest ranks first.
    ranked = sorted(range(len(files)), key=lambda i: (files[i].session_key, -files[i].size, files[i].name))
    rank: dict[int, int] = {}
    previous, r = None, 0
    for i in ranked:
        r = r + 1 if files[i].session_key == previous else 0
        previous = files[i].session_key
        rank[i] = r
    return pl.DataFrame(
        {
            "file_idx": list(range(len(files))),
            "source_file": [f.name for f in files],
            "session_key": [f.session_key for f in files],
            "session_id": [f.session_id for f in files],
            "stream_kind": [f.stream_kind for f in files],
            "parent_session_id": [f.parent_session_id for f in files],
            "agent_id": [f.agent_id for f in files],
            "sidecar": [f.sidecar for f in files],
            "content_level": [f.content_level for f in files],
            "producer_source": [f.producer_source for f in files],
            "file_rank": [rank[i] for i in range(len(files))],
            # positions in a second copy of a stream's file are told apart by a prefix
            "position_prefix": [f"copy{rank[i]}:" if rank[i] else "" for i in range(len(files))],
            "record_source": ["transcript"] * len(files),
            "meta": [f.meta for f in files],
        },
        schema={
            "file_idx": pl.Int32, "source_file": pl.String, "session_key": pl.String, "session_id": pl.String,
            "stream_kind": pl.String, "parent_session_id": pl.String, "agent_id": pl.String,
            "sidecar": pl.String, "content_level": pl.String, "producer_source": pl.String,
            "file_rank": pl.Int32, "position_prefix": pl.String, "record_source": pl.String,
            "meta": pl.String,
        },
    )
