"""Pass 1 of the Claude Code converter: each chunk of a batch's lines is decoded alone.

A chunk's blank lines are counted and dropped, its envelopes decoded (sql/batch/observations.sql),
its `}{` lines recovered (transforms/recover.py) and its observations classified
(transforms/classify.py). The batch's observations are kept twice: the wide frame (every column,
the JSON text included) and the narrow one (NARROW_COLUMNS: what the narrow stage and the record
table read, no text). A batch with a store writes the wide rows there as they are made.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import duckdb
import polars as pl

from batch import slices, sql
from batch.formats.claude_code.store import Store
from batch.formats.lines import LINE_TOO_LONG, LineChunks, concat_lines
from batch.transforms.classify import classify
from batch.transforms.elide import Elided
from batch.transforms.recover import OBJECT_SCHEMA, REJECT_SCHEMA, recover

# Slices of a batch's lines decoded at once (sql/batch/observations.sql), by the size of their text
# (docs/decisions/004-slices.md).
OBSERVE_SLICE_BYTES = 64 << 20
# The reason of a line rejected without being decoded: longer than a batch converted again after
# running out of memory may decode (pipeline, "A batch out of memory").

# The columns of an observation that the narrow stage reads, and nothing wide (no JSON text, no
# content, no toolUseResult, no line text): foreign files (file_idx, native_type) and versions
# (version); the sidechain split (sql/batch/sidechain_roots.sql: uuid, parent_uuid, is_sidechain,
# stream_kind, native_agent_id; it changes session_key and stream_kind); ord (file_rank, file_idx,
# line, sub); and sql/batch/observation_index.sql (session_key, position, native_type, native_subtype,
# uuid, parent_uuid, message_id, permission_mode, json_hash, and is_compact_summary as classify
# derives it). The converter keeps these columns of each chunk of lines (_pass1) in the frame
# registered as `narrow_observations`, with `ord` added by the narrow stage.
# sql/batch/record_table.sql (docs/architecture.md, "The path of one session, from bytes to tables") reads
# it too: kind, logical_parent_uuid, prompt_id, progress_agent_id, progress_copy_uuid,
# result_agent_id, result_call_ids, queue_content, queue_reason, attribution_mcp_server and
# attribution_mcp_tool (besides keys named above). The chunk boundaries of pass 2 (chunk_ends)
# read json_bytes, the size of the observation's JSON text.
NARROW_COLUMNS = (
    "file_idx", "line", "sub", "file_rank", "session_key", "stream_kind", "position", "native_type",
    "native_subtype", "version", "uuid", "parent_uuid", "is_sidechain", "native_agent_id", "message_id",
    "permission_mode", "json_hash", "is_compact_summary",
    "kind", "logical_parent_uuid", "prompt_id", "progress_agent_id", "progress_copy_uuid", "result_agent_id",
    "result_call_ids", "queue_content", "queue_reason", "attribution_mcp_server", "attribution_mcp_tool",
    "json_bytes",
)


# A blank line: Unicode White_Space alone, as str.strip_chars tells it, without a stripped copy.
BLANK = pl.col("text").str.contains(r"^\s*$")


def too_long_rejects(lines: pl.DataFrame) -> pl.DataFrame:
    """The rejects (REJECT_SCHEMA) of `lines` (file_idx, line, byte_length) rejected undecoded: longer
    than a batch converted again after running out of memory may decode."""
    return lines.select(
        "file_idx", "line", reason=pl.lit(LINE_TOO_LONG),
        detail=pl.format("a line of {} bytes needs more memory than this run may use (--memory-mb)", pl.col("byte_length")),
    ).cast(REJECT_SCHEMA)


@dataclass
class Decoded:
    """Pass 1's frames of a batch (see decode). The narrow stage takes `observations` and `narrow`
    out (sets them to None), so that the frames it makes of them are the only ones held."""

    lines: pl.DataFrame
    observations: pl.DataFrame | None
    narrow: pl.DataFrame | None
    rejects: pl.DataFrame
    line_counts: pl.DataFrame


def decode(
    con: duckdb.DuckDBPyConnection, reader: LineChunks, store: Store | None = None, elided: Elided | None = None
) -> Decoded:
    """Pass 1: each chunk of lines (the read slices the reader yields, gathered up to
    OBSERVE_SLICE_BYTES of text) is decoded alone: its blank lines dropped (counted), its envelopes
    decoded (one parse per line: the decode also tells the lines that are one JSON object from the
    others, which go to recovery; the objects recovered are decoded after them), its `}{` lines
    recovered, its observations classified.

    Returns the batch's non-blank lines, its classified observations (the wide frame: every chunk's
    lines' objects, then every chunk's recovered objects, the order of one decode of the whole
    batch), the NARROW_COLUMNS of the same rows in the same order (the narrow frame), the rejects,
    and per file its count of non-blank and of blank lines. The lines of a stream that failed to be
    read to its end are dropped, as if it could not be read at all.

    With a `store`, each chunk's classified observations go to its table `wide` as they are made
    (store_wide) and no wide frame is returned (None); the narrow frame then also holds each row's
    `wide_row` there. The lines keep their text only where a later step reads it: the rejected
    lines, and the first line of each file (a foreign file's first bytes)."""
    blank = BLANK
    lines, counts, rejects, observed, recovered = [], [], [], [], []

    max_line = sql.max_line(con)  # a batch converted again after running out of memory

    def chunk_pass(chunk: pl.DataFrame) -> None:
        counts.append(chunk.group_by("file_idx").agg(lines=(~blank).sum(), blank_lines=blank.sum()))
        chunk = chunk.filter(~blank)
        # a line longer than `max_line` is rejected before its JSON is decoded (its bytes kept)
        too_long = pl.lit(False) if max_line is None else pl.col("byte_length") > max_line
        read = chunk.filter(~too_long)
        decoded = observe(
            con,
            read.select(
                "file_idx", "line", sub=pl.lit(None, pl.Int64), json=pl.col("text"), reason=pl.lit(None, pl.String)
            ).cast(OBJECT_SCHEMA),
            keep_index=True,
            elided=elided,
        )
        not_objects = read.filter(~pl.int_range(pl.len(), dtype=pl.UInt32).is_in(decoded.get_column("obj_idx").implode()))
        objects, chunk_rejects = recover(not_objects.select("file_idx", "line", "text", "has_newline"))
        if max_line is not None:
            chunk_rejects = pl.concat([chunk_rejects, too_long_rejects(chunk.filter(too_long))]).sort("file_idx", "line")
        classified = classified_of(decoded.drop("obj_idx"))
        observed.append(classified if store is None else store_wide(store, classified))
        if not objects.is_empty():
            recovered.append(classified_of(observe(con, objects.cast(OBJECT_SCHEMA), elided=elided)))
        lines.append(chunk if store is None else _read_text(chunk, chunk_rejects))
        rejects.append(chunk_rejects)

    for chunk in _chunks(reader):
        chunk_pass(chunk)
    if store is None:
        wide = pl.concat(observed, rechunk=True) if len(observed) > 1 else observed[0]
        if recovered:
            wide = pl.concat([wide, *recovered])
        narrow = pl.concat([narrow_columns(frame) for frame in (*observed, *recovered)], rechunk=True)
    else:
        wide = None
        narrow = pl.concat([*observed, *(store_wide(store, frame) for frame in recovered)], rechunk=True)
    observed.clear()  # the chunks' frames, no longer needed
    recovered.clear()
    line_counts = pl.concat(counts).group_by("file_idx").agg(pl.col("lines", "blank_lines").sum())
    lines, rejects = concat_lines(lines), pl.concat(rejects)
    if failed := reader.failed:
        kept = ~pl.col("file_idx").is_in(failed)
        lines, narrow = lines.filter(kept), narrow.filter(kept)
        wide = None if wide is None else wide.filter(kept)
        rejects, line_counts = rejects.filter(kept), line_counts.filter(kept)
    return Decoded(lines, wide, narrow, rejects, line_counts)


def _chunks(reader: LineChunks) -> Iterator[pl.DataFrame]:
    """The reader's consecutive read slices gathered into chunks of at most OBSERVE_SLICE_BYTES of
    text (a slice larger than that alone): a chunk's statements have a fixed cost, which many small
    read slices would pay each. A batch without lines is one empty chunk (its frames have their
    schemas)."""
    pending, size, chunks = [], 0, 0
    for piece in reader:
        piece_size = piece.get_column("text").str.len_bytes().sum()
        if pending and size + piece_size > OBSERVE_SLICE_BYTES:
            yield concat_lines(pending)
            pending, size, chunks = [], 0, chunks + 1
        pending.append(piece)
        size += piece_size
    if pending or not chunks:
        yield concat_lines(pending)


def narrow_columns(classified: pl.DataFrame) -> pl.DataFrame:
    """The NARROW_COLUMNS of classified observations (json_bytes: the size of their JSON text)."""
    return classified.select(*NARROW_COLUMNS[:-1], json_bytes=pl.col("json").str.len_bytes())


def store_wide(store: Store, classified: pl.DataFrame) -> pl.DataFrame:
    """Append classified observations to the store's table `wide`, numbered `wide_row` after the rows
    already there, and return their narrow frame with that number (the wide frame's row order) and
    their sidechain root (null: the sidechain split sets it in the narrow frame)."""
    classified = classified.with_columns(wide_row=pl.int_range(pl.len(), dtype=pl.Int64) + store.rows.get("wide", 0))
    store.append("wide", classified)
    return _owned(narrow_columns(classified).with_columns(classified.select("sidechain_root", "wide_row")))


def _owned(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of `frame` in memory of its own. A column of a statement's result shares the memory of
    the whole result (DuckDB hands it over to Arrow as one block per batch of rows, released when no
    column of it is left): a narrow frame kept from a wide result would keep all of it."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="uncompressed")
    buffer.seek(0)
    return pl.read_ipc(buffer)


def _read_text(lines: pl.DataFrame, rejects: pl.DataFrame) -> pl.DataFrame:
    """`lines` with the text of the rejected lines and of each file's first line only (copied, so
    that the slice's text buffer is not kept alive by them); null elsewhere."""
    rejected = pl.struct("file_idx", "line").is_in(rejects.select(pl.struct("file_idx", "line")).to_series().implode())
    kept = lines.filter(rejected | (pl.col("line") == 1)).select("file_idx", "line", text=pl.concat_str("text", pl.lit("")))
    return lines.drop("text").join(kept, on=["file_idx", "line"], how="left", maintain_order="left").select(lines.columns)


def classified_of(observations: pl.DataFrame) -> pl.DataFrame:
    """classify (per row) decoded observations; their sidechain root, set by the narrow stage's
    sidechain split (_split_sidechains), is null until then."""
    return classify(observations.with_columns(sidechain_root=pl.lit(None, pl.String)))


def observe(
    con: duckdb.DuckDBPyConnection, objects: pl.DataFrame, *, keep_index: bool = False, elided: Elided | None = None
) -> pl.DataFrame:
    """Decode the envelope of each object (sql/batch/observations.sql); the JSON text is not copied
    through DuckDB: the result names its object by obj_idx, and a gather shares the string buffers.
    A text that is not one JSON object has no row; `keep_index` keeps obj_idx (the row of `objects`).
    With `elided`, the long strings of long texts are elided first (the result's `json` too)."""
    if elided is not None:
        objects = objects.with_columns(json=elided.reduce(objects.get_column("json")))
    # The statement decodes each object alone (no window, no aggregate): run over slices of the
    # objects, about OBSERVE_SLICE_BYTES of text each, its results concatenated are its rows over all
    # of them in the same order, and DuckDB's working memory is the slice's (returned after each).
    frames = []
    for start, end in slices.ranges(objects.get_column("json").str.len_bytes(), OBSERVE_SLICE_BYTES):
        sql.register(con, "batch_objects", objects.slice(start, end - start).with_row_index("obj_idx", offset=start))
        frames.append(sql.frame(con, "observations"))
        sql.flush(con)
    con.unregister("batch_objects")
    observations = pl.concat(frames, rechunk=True) if len(frames) != 1 else frames[0]
    del frames
    if not observations.get_column("is_object").all():
        observations = observations.filter(pl.col("is_object"))
    observations = observations.drop("is_object")
    observations = observations.with_columns(json=objects.get_column("json").gather(observations.get_column("obj_idx")))
    return observations if keep_index else observations.drop("obj_idx")
