"""The narrow stage of the Claude Code converter: what is decided over the narrow frame of a batch.

Foreign files (no line a typed JSON object) and each file's versions; subagents whose transcript
is absent rebuilt from their agent_progress copies (the one step that reads the wide frame); inline
1.0.x sidechains split into streams of their own; the observations numbered (ord) and indexed
(sql/batch/observation_index.sql); the record table and the tool-call pairs related from narrow
columns alone; and the observations cut into the chunks of pass 2 (pass2.chunk_ends).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from batch import sql
from batch.formats.claude_code import pass1
from batch.formats.claude_code import store as stored
from batch.formats.claude_code.pass2 import chunk_ends
from batch.formats.claude_code.store import Store
from batch.transforms.recover import OBJECT_SCHEMA


@dataclass
class Narrowed:
    """What the narrow stage hands to pass 2 and to the batch's tables."""

    classified: pl.DataFrame | None  # the wide frame with ord; None with a store (its view `classified`)
    rows_by_ord: pl.Series  # the row of `classified` of each ord (at ord - 1)
    ends: pl.Series  # the last ord of each chunk of pass 2
    line_chunks: pl.DataFrame  # the chunk of each line with observations (file_idx, line, chunk)
    keys: pl.DataFrame | None  # with a store: the narrow frame's keys of the stored rows
    files_frame: pl.DataFrame  # batch_files, the rebuilt subagents' virtual files and is_foreign included
    foreign: pl.Series  # the file_idx of foreign files
    rejects: pl.DataFrame  # the rejects of the files kept
    versions: dict[int, list[str]]  # per file_idx, the versions its lines name
    blank_counts: dict[int, int]  # per file_idx, its blank lines


def run(
    con: duckdb.DuckDBPyConnection,
    decoded: pass1.Decoded,
    files_frame: pl.DataFrame,
    store: Store | None,
    chunk_bytes: int,
) -> Narrowed:
    """The narrow stage over pass 1's frames (see pass1.decode): foreign files, versions, the
    sidechain split, ord and observation_index read the narrow frame; only the agent_progress rebuild
    reads the wide one (the copies' JSON). Registers `classified`, and materializes observation_index,
    record_table and call_pairs; the chunks of pass 2 are about `chunk_bytes` of JSON each."""
    observations, narrow, rejects, line_counts = decoded.observations, decoded.narrow, decoded.rejects, decoded.line_counts
    decoded.observations = decoded.narrow = None  # replaced by the frames made of them below
    versions = dict(
        narrow.group_by("file_idx").agg(pl.col("version").drop_nulls().unique(maintain_order=True)).iter_rows()
    )
    blank_counts = dict(line_counts.select("file_idx", "blank_lines").iter_rows())
    # A file in which no line is a typed JSON object is foreign input: reported once, not per line.
    typed = narrow.filter(pl.col("native_type").is_not_null()).get_column("file_idx").unique()
    foreign = line_counts.filter((pl.col("lines") > 1) & ~pl.col("file_idx").is_in(typed.implode())).get_column("file_idx")
    files_frame = files_frame.with_columns(is_foreign=pl.col("file_idx").is_in(foreign.implode()))
    not_foreign = ~pl.col("file_idx").is_in(foreign.implode())
    narrow, rejects = narrow.filter(not_foreign), rejects.filter(not_foreign)
    sql.register(con, "batch_files", files_frame)
    sql.register(con, "batch_rejects", rejects)
    if store is None:
        observations = observations.filter(not_foreign)
        sql.register(con, "observations", observations)
    else:  # the stored rows of the files kept
        sql.register(con, "store_keys", narrow.select("wide_row"))
        con.execute("create or replace temp view observations as select * exclude (wide_row) from wide "
                    "where wide_row in (select wide_row from store_keys)")
    observations, narrow, files_frame = _rebuild_from_progress(con, observations, narrow, files_frame, store)
    if store is None:
        con.unregister("observations")  # read by progress_copies alone
    else:
        con.execute("drop view observations")
    observations, narrow = _split_sidechains(con, observations, narrow)
    narrow, rows_by_ord = _ordered(narrow)
    # the narrow frame's rows are the wide frame's, in the same order: its ord is theirs
    if store is None:
        classified = observations.with_columns(narrow.get_column("ord"))
        sql.register(con, "classified", classified)
    else:
        classified = None
        stored.register_classified(con, narrow)
    del observations
    sql.register(con, "narrow_observations", narrow)
    sql.materialize(con, "observation_index")
    sql.view(con, "observation_keys")
    # what relates the records of a session, from narrow columns alone; records_full joins it
    sql.materialize(con, "record_table")
    # which records hold each tool call and its result, from narrow columns alone; tool_calls reads it
    sql.materialize(con, "call_pairs")
    con.unregister("narrow_observations")  # read by observation_index and record_table alone
    spans = con.sql(
        "select min(ord) as first, max(ord) as last from observation_index where is_live group by record_id"
    ).pl()
    ends = chunk_ends(narrow.select("ord", "file_idx", "line", "json_bytes"), spans, chunk_bytes)
    line_chunks = narrow.select(
        "file_idx", "line", chunk=ends.search_sorted(narrow.get_column("ord"), side="left")
    ).unique(["file_idx", "line"])
    keys = None if store is None else narrow.select("wide_row", "session_key", "stream_kind", "sidechain_root", "ord")
    return Narrowed(classified, rows_by_ord, ends, line_chunks, keys, files_frame, foreign, rejects, versions, blank_counts)


def _rebuild_from_progress(
    con: duckdb.DuckDBPyConnection,
    observations: pl.DataFrame | None,
    narrow: pl.DataFrame,
    files_frame: pl.DataFrame,
    store: Store | None,
) -> tuple[pl.DataFrame | None, pl.DataFrame, pl.DataFrame]:
    """Rebuild subagent streams whose transcript is absent from their agent_progress copies.

    Each rebuilt stream reads as a virtual file: its objects keep the parent's line numbers,
    with positions prefixed `agent_progress:`, and its records say where they came from. The copies
    are read from the wide observations (their JSON, registered as `observations`); the rebuilt
    objects, decoded and classified, are added to the wide frame (or the store) and to the narrow one.
    """
    copies = sql.frame(con, "progress_copies")
    if copies.is_empty():
        return observations, narrow, files_frame
    files_frame, objects = virtual_files(copies, files_frame)
    sql.register(con, "batch_files", files_frame)
    rebuilt = pass1.classified_of(pass1.observe(con, objects))
    if store is not None:
        return None, pl.concat([narrow, pass1.store_wide(store, rebuilt)]), files_frame
    return pl.concat([observations, rebuilt]), pl.concat([narrow, pass1.narrow_columns(rebuilt)]), files_frame


def virtual_files(copies: pl.DataFrame, files_frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The virtual file of each subagent stream rebuilt from agent_progress copies (sql/batch/progress_copies.sql),
    added to `files_frame` after its files, and the copies as objects of those files (OBJECT_SCHEMA)."""
    parents = files_frame.select("file_idx", "content_level", "producer_source", "meta")
    virtual = (
        copies.unique("child_session_key", keep="first", maintain_order=True)
        .join(parents, on="file_idx", how="left")
        .with_row_index("i")
        .select(
            file_idx=(pl.col("i") + files_frame.height).cast(pl.Int32),
            source_file="source_file",
            session_key="child_session_key",
            session_id="agent_id",
            stream_kind=pl.lit("subagent"),
            parent_session_id="parent_session_id",
            agent_id="agent_id",
            sidecar=pl.lit(None, pl.String),
            content_level="content_level",
            producer_source="producer_source",
            file_rank=pl.lit(0, pl.Int32),
            position_prefix=pl.lit("agent_progress:"),
            record_source=pl.lit("agent_progress"),
            meta="meta",
            is_foreign=pl.lit(False),
        )
    )
    files_frame = pl.concat([files_frame, virtual])
    objects = copies.join(
        virtual.select("file_idx", child_session_key="session_key"), on="child_session_key", suffix="_virtual"
    ).select(
        file_idx="file_idx_virtual", line="line", sub="sub", json="json", reason=pl.lit(None, pl.String)
    ).cast(OBJECT_SCHEMA)
    return files_frame, objects


def _split_sidechains(
    con: duckdb.DuckDBPyConnection, observations: pl.DataFrame | None, narrow: pl.DataFrame
) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """Move inline 1.0.x sidechain objects into one stream per sidechain root: the roots are found in
    the narrow frame (sql/batch/sidechain_roots.sql), and the session_key and stream_kind of those objects
    change in the wide and in the narrow frame alike (the wide one also keeps the root). Without a
    wide frame (a store's batch), the narrow frame keeps the root for the stored rows."""
    sql.register(con, "narrow_observations", narrow)
    roots = sql.frame(con, "sidechain_roots")
    con.unregister("narrow_observations")
    if roots.is_empty():  # no inline sidechains (transcripts after 1.0.x)
        return observations, narrow
    root = pl.col("root_uuid")

    def split(frame: pl.DataFrame, **keep: pl.Expr) -> pl.DataFrame:
        return (
            frame.join(roots, on=["file_idx", "line", "sub"], how="left", nulls_equal=True, maintain_order="left")
            .with_columns(
                session_key=pl.when(root.is_not_null())
                .then(pl.col("session_key") + "/sidechain-" + root)
                .otherwise(pl.col("session_key")),
                stream_kind=pl.when(root.is_not_null()).then(pl.lit("sidechain")).otherwise(pl.col("stream_kind")),
                **keep,
            )
            .drop("root_uuid")
        )

    if observations is None:
        return None, split(narrow, sidechain_root=root)
    return split(observations, sidechain_root=root), split(narrow)


def _ordered(classified: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Number the observations by their position in the batch: `ord`, from 1, in the order of
    (file_rank, file_idx, line, sub; a null sub first), rows with equal keys in the order of
    `classified` (objects rebuilt from the agent_progress copies in two copies of a stream's file
    can share a line). ord is unique: the statements key an observation by it (observation_index.sql),
    not by its row in this batch's frame, whose rows stay in their order (recovered and rebuilt
    objects after the lines). Also returns the row of `classified` of each ord (at ord - 1), through
    which the JSON texts a statement names are gathered."""
    rows_by_ord = classified.select(
        pl.arg_sort_by("file_rank", "file_idx", "line", "sub", nulls_last=False, maintain_order=True)
    ).to_series()
    return classified.with_columns(ord=rows_by_ord.arg_sort().cast(pl.Int64) + 1), rows_by_ord
