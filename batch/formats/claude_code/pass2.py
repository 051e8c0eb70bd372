"""Pass 2 of the Claude Code converter: each chunk of a batch's observations is folded alone.

The chunks (chunk_ends) are contiguous ranges of ord cut where no record's live observations are
on both sides; each folds its observations into records (sql/batch/records_full.sql), parts
(sql/batch/parts.sql), source lines and number faults, and turns its rejected lines into rejects.
The JSON texts a statement names are gathered from the frame of observations, not copied through
DuckDB. With a store, the chunks' results are written there instead of kept as frames.
"""

from __future__ import annotations

import duckdb
import polars as pl

from batch import sql
from batch.formats.claude_code import store as stored
from batch.formats.claude_code.store import Store
from batch.sources.base import Stream
from batch.transforms.recover import UNCOMMITTED

# Slices of a batch's records whose parts are converted at once (sql/batch/parts.sql), by the size of their
# JSON: the statement's working memory is the slice's (docs/decisions/004-slices.md).
PART_SLICE_BYTES = 64 << 20
# records_full.sql's order by
RECORDS_ORDER = ("session_key", "seq")


def chunk_ends(observations: pl.DataFrame, spans: pl.DataFrame, target: int) -> pl.Series:
    """The chunks of pass 2: contiguous ranges of ord of about `target` bytes of JSON text each.

    `observations` holds ord (1 to n), file_idx, line and json_bytes of every observation of the
    batch; `spans` the first and last ord of each record's live observations. A cut between ord k and
    k + 1 is allowed where they are on different lines (the objects recovered from one line stay
    together) and no record has live observations on both sides (a record's first-seen and latest
    observation, all its blocks, a boundary and its summary are in one chunk). Each chunk ends at the
    last allowed cut within `target` bytes of its start; where there is none (a record's live span
    longer than that), at the first allowed cut after it. Returns the last ord of each chunk
    (ascending, the last one n; [0] for a batch without observations): ord o is in chunk
    `ends.search_sorted(o, side="left")`. The loop runs once per chunk, not per line."""
    n = observations.height
    if n == 0:
        return pl.Series("ord", [0], pl.Int64)
    frame = observations.sort("ord")
    # records open after each ord: their live span starts at it or before and ends after it
    starts = spans.group_by(ord="first").len("starts")
    stops = spans.group_by(ord="last").len("stops")
    cuts = (
        frame.select(
            pl.col("ord").cast(pl.Int64),
            size=pl.col("json_bytes").cast(pl.Int64).clip(lower_bound=1).cum_sum(),
            new_line=(pl.col("file_idx") != pl.col("file_idx").shift(-1)) | (pl.col("line") != pl.col("line").shift(-1)),
        )
        .join(starts.cast({"ord": pl.Int64}), on="ord", how="left", maintain_order="left")
        .join(stops.cast({"ord": pl.Int64}), on="ord", how="left", maintain_order="left")
        .with_columns(open=(pl.col("starts").fill_null(0).cast(pl.Int64) - pl.col("stops").fill_null(0).cast(pl.Int64)).cum_sum())
        .filter(((pl.col("open") == 0) & pl.col("new_line").fill_null(True)) | (pl.col("ord") == n))
    )
    cut_sizes, cut_ords = cuts.get_column("size"), cuts.get_column("ord")
    ends, start = [], 0
    while not ends or ends[-1] != n:
        i = cut_sizes.search_sorted(start + target, side="right") - 1
        if i < 0 or cut_sizes[i] <= start:  # no allowed cut within the target: the next one
            i = cut_sizes.search_sorted(start, side="right")
        ends.append(cut_ords[i])
        start = cut_sizes[i]
    return pl.Series("ord", ends, pl.Int64)


def run(
    con: duckdb.DuckDBPyConnection,
    classified: pl.DataFrame,
    rows_by_ord: pl.Series,
    ends: pl.Series,
    lines: pl.DataFrame,
    rejects: pl.DataFrame,
    line_chunks: pl.DataFrame,
    files_frame: pl.DataFrame,
    foreign: pl.Series,
    files: list[Stream],
    store: Store | None = None,
    keys: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame]:
    """Pass 2 of the core: number_faults, records_full (with its texts), parts, source_lines and the
    rejects, run once per chunk (chunk_ends) over the chunk's observations, lines and rejects, and
    concatenated into the frames one run over the whole batch gives (sorted by each one's order).

    A chunk's observations are `classified`'s rows of its ords, in the frame's order; each record is
    in the chunk of its live observations (record_table, materialized before, relates the records
    across chunks). A line belongs to the chunk of its observations (line_chunks); a line without any
    (rejected, or of a foreign file) to the last chunk.

    With a `store`, a chunk's observations are read from it (`keys`: the narrow frame's keys of
    them, store.chunk_rows), and its records, parts and source lines go to it, as the tables
    `records_pieces`, `parts_pieces` and `source_lines_pieces`, a run each chunk (sorted as the frame's
    rows), read as `records_full`, `batch_parts` and `batch_source_lines` (in another order than the
    frames'; Store.merged gives theirs); None is returned for those frames."""
    last = ends.len() - 1
    pieces: list[list[pl.DataFrame]] = [[], [], [], [], []]
    if last > 0:
        lines_of, rejects_of = _chunk_of_lines(lines, line_chunks, last), _chunk_of_lines(rejects, line_chunks, last)
        # each chunk reads the rows of the index and of the record table of its own observations
        # and records (the statements join them by ord): the whole tables are set aside, and
        # restored, unchanged, for the steps after pass 2
        for name in ("observation_index", "record_table"):
            con.execute(f'alter table "{name}" rename to "{name}_whole"')
    if store is not None:
        con.execute("drop view classified")  # over the store; each chunk's rows are registered instead
    first = 1
    for chunk, end in enumerate(ends):
        if last == 0 and store is None:  # one chunk: the batch's frames as they are
            part, part_rows, part_lines, part_rejects = classified, rows_by_ord, lines, rejects
        else:
            # the chunk's rows of classified in the frame's order, and the row of each of its ords
            if store is None:
                part = classified.gather(rows_by_ord.slice(first - 1, end - first + 1).sort())
            else:
                part = stored.chunk_rows(store, keys.gather(rows_by_ord.slice(first - 1, end - first + 1).sort()))
            part_rows = part.get_column("ord").arg_sort()
            if last == 0:  # a store's one chunk
                part_lines, part_rejects = lines, rejects
            else:
                part_lines, part_rejects = lines.filter(lines_of == chunk), rejects.filter(rejects_of == chunk)
                for name, key in (("observation_index", "ord"), ("record_table", "first_ord")):
                    con.execute(
                        f'create or replace temp table "{name}" as select * from "{name}_whole" where {key} between ? and ?',
                        [first, end],
                    )
        _fold_chunk(con, part, part_rows, part_lines, part_rejects, first, store, pieces)
        pieces[4].append(_rejects_out(part_lines, part_rejects, files_frame, foreign if chunk == last else foreign.clear(), files))
        first = end + 1
    del part, part_rows, part_lines, part_rejects
    if last > 0:
        for name in ("observation_index", "record_table"):
            con.execute(f'drop table "{name}"')
            con.execute(f'alter table "{name}_whole" rename to "{name}"')
    con.unregister("classified")
    return _joined(con, pieces, store)


def _fold_chunk(
    con: duckdb.DuckDBPyConnection,
    part: pl.DataFrame,
    part_rows: pl.Series,
    part_lines: pl.DataFrame,
    part_rejects: pl.DataFrame,
    first: int,
    store: Store | None,
    pieces: list[list[pl.DataFrame]],
) -> None:
    """Fold one chunk (its observations `part`, from ord `first`, their rows by ord, its lines and
    rejects): number_faults, records_full with its texts, parts and source_lines, appended to
    `pieces` (or, with a store, to its tables)."""
    sql.register(con, "classified", part)
    sql.register(con, "batch_lines", part_lines)
    sql.register(con, "batch_rejects", part_rejects)
    # This statement, records_full and parts need the most working memory of the chunk; DuckDB
    # keeps it for reuse, so it is returned after each (the later statements then start lower).
    # `parts` runs a slice of the records at a time (_parts): each slice needs less than what
    # `records_full` leaves.
    pieces[0].append(sql.frame(con, "number_faults"))
    sql.flush(con)
    records = _with_texts(sql.frame(con, "records_full"), part, part_rows, first)
    sql.flush(con)
    parts = _parts(con, records)
    sql.flush(con)
    source_lines = _source_lines(con, part, part_rows, first)
    if store is None:
        pieces[1].append(records)
        pieces[2].append(parts)
        pieces[3].append(source_lines)
    else:
        for table, frame in (("records_pieces", records), ("parts_pieces", parts), ("source_lines_pieces", source_lines)):
            store.append(table, frame)


def _joined(
    con: duckdb.DuckDBPyConnection, pieces: list[list[pl.DataFrame]], store: Store | None
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame]:
    """The chunks' pieces as the frames of one run over the batch (see run)."""
    orders = (
        ("session_key", "source_file", "line", "field"),  # number_faults.sql's order by (ties: in one line)
        RECORDS_ORDER,
        sql.sorted_by("parts"),
        sql.sorted_by("source_lines_out"),
    )
    rejects = pieces[4]
    rejects_out = rejects[0] if len(rejects) == 1 else pl.concat(rejects).sort("source_file", "line", nulls_last=False, maintain_order=True)
    if store is not None:
        for table, name in (("records_full", "records"), ("batch_parts", "parts"), ("batch_source_lines", "source_lines")):
            con.execute(f'create or replace temp view "{table}" as select * from {name}_pieces')
        return _in_order(pieces[0], orders[0]), None, None, None, rejects_out
    return (*(_in_order(chunks, order) for chunks, order in zip(pieces[:4], orders)), rejects_out)


def _in_order(chunks: list[pl.DataFrame], order: tuple[str, ...]) -> pl.DataFrame:
    """The chunks' frames of one statement as one frame, sorted by its order (ties in chunk order)."""
    return chunks[0] if len(chunks) == 1 else pl.concat(chunks, rechunk=True).sort(order, nulls_last=True, maintain_order=True)


def _chunk_of_lines(frame: pl.DataFrame, line_chunks: pl.DataFrame, last: int) -> pl.Series:
    """The chunk of each row of `frame` (lines or rejects, by file_idx and line): its line's, or the
    last chunk for a line without observations."""
    return (
        frame.select("file_idx", "line")
        .join(line_chunks, on=["file_idx", "line"], how="left", maintain_order="left")
        .get_column("chunk")
        .fill_null(last)
    )


def _parts(con: duckdb.DuckDBPyConnection, records: pl.DataFrame) -> pl.DataFrame:
    """Run sql/batch/parts.sql over slices of the records, about PART_SLICE_BYTES of their JSON each, and
    concatenate the results. Each step of the statement is per record, so the rows are those of one
    run; the slices are ranges of its declared order (session_key, record_id), so the concatenation is
    in that order too. DuckDB's working memory (the blocks, their decode, its hash tables) is then the
    slice's, not the batch's."""
    keys = records.select("session_key", "record_id", size=pl.col("native").str.len_bytes()).sort(
        "session_key", "record_id", nulls_last=True
    ).select("record_id", part_slice=pl.col("size").cum_sum() // PART_SLICE_BYTES)
    slices = keys.partition_by("part_slice", maintain_order=True, include_key=False) or [keys.select("record_id")]
    frames = []
    for records_of_slice in slices:
        sql.register(con, "batch_part_records", records_of_slice)
        frames.append(sql.frame(con, "parts"))
    con.unregister("batch_part_records")
    return pl.concat(frames, rechunk=True) if len(frames) != 1 else frames[0]


def tool_calls(con: duckdb.DuckDBPyConnection, records: pl.DataFrame, parts: pl.DataFrame) -> pl.DataFrame:
    """Run sql/batch/tool_calls.sql and attach the JSON texts it names: a model call's input (its block in
    parts) and its result's toolUseResult (its record). A join gathers them and shares the string
    buffers, where DuckDB would copy every text into its result and its sort."""
    calls = sql.frame(con, "tool_calls")
    names = [name for name in calls.columns if name != "call_part_index"]
    return (
        calls.join(
            parts.select("session_key", call_record_id="record_id", call_part_index="part_index", block_input="tool_input"),
            on=["session_key", "call_record_id", "call_part_index"], how="left", maintain_order="left",
        )
        .join(
            records.select("session_key", result_record_id="record_id", record_result="tool_use_result"),
            on=["session_key", "result_record_id"], how="left", maintain_order="left",
        )
        # a user's shell command has its own input and result (not null); a model call has neither
        .with_columns(input=pl.coalesce("input", "block_input"), result_native=pl.coalesce("result_native", "record_result"))
        .select(names)
    )


def _source_lines(
    con: duckdb.DuckDBPyConnection, classified: pl.DataFrame, rows_by_ord: pl.Series, first_ord: int = 1
) -> pl.DataFrame:
    """Run sql/batch/source_lines_out.sql and attach the JSON texts it names by native_ord."""
    return _gathered(sql.frame(con, "source_lines_out"), classified, rows_by_ord, first_ord, native="json")


def _with_texts(records: pl.DataFrame, classified: pl.DataFrame, rows_by_ord: pl.Series, first_ord: int = 1) -> pl.DataFrame:
    """Attach the JSON texts records_full names by ord."""
    return _gathered(records, classified, rows_by_ord, first_ord, native="json", tool_use_result="tool_use_result")


def _gathered(
    frame: pl.DataFrame, classified: pl.DataFrame, rows_by_ord: pl.Series, first_ord: int, **texts: str
) -> pl.DataFrame:
    """Each column `<name>_ord` of `frame` replaced by `<name>`, the column of `classified` that
    `texts` names, gathered at the rows of those observations (`rows_by_ord`, see _ordered: the row of
    ord `first_ord + i` at i, the ords of `classified` being consecutive from `first_ord`; a null ord
    gives a null text): a gather shares the string buffers, where DuckDB would copy every text into
    its result."""
    return frame.with_columns(
        classified.get_column(column).gather(rows_by_ord.gather(frame.get_column(f"{name}_ord") - first_ord)).alias(name)
        for name, column in texts.items()
    ).drop(f"{name}_ord" for name in texts)


def _rejects_out(
    lines: pl.DataFrame, rejects: pl.DataFrame, files_frame: pl.DataFrame, foreign: pl.Series, files: list[Stream]
) -> pl.DataFrame:
    names = files_frame.select("file_idx", "source_file")
    bad = (
        rejects.filter(pl.col("reason") != UNCOMMITTED)  # kept in source_lines only: not a reject
        .join(lines, on=["file_idx", "line"], how="left")
        .join(names, on="file_idx", how="left")
        .select(
            "source_file", "line", "byte_offset", "byte_length", "reason", "detail",
            first_bytes=pl.col("text").str.slice(0, 120),
            raw=pl.coalesce(pl.col("raw"), pl.col("text").cast(pl.Binary)),
        )
    )
    whole = (
        names.filter(pl.col("file_idx").is_in(foreign.implode()))
        .join(lines.filter(pl.col("line") == 1).select("file_idx", first_bytes=pl.col("text").str.slice(0, 120)),
              on="file_idx", how="left")
        .select(
            "source_file",
            line=pl.lit(None, pl.Int64),
            byte_offset=pl.lit(0, pl.Int64),
            byte_length=pl.col("file_idx").replace_strict(
                {i: f.size for i, f in enumerate(files)}, default=None, return_dtype=pl.Int64
            ),
            reason=pl.lit("foreign_file"),
            detail=pl.lit("no line is a Claude Code JSON object (for example one pretty-printed JSON document)"),
            first_bytes="first_bytes",
            raw=pl.lit(None, pl.Binary),
        )
    )
    return pl.concat([bad, whole], how="vertical_relaxed").sort("source_file", "line", nulls_last=False)
