"""Bytes to physical lines, columnar: the shared first step of line-based formats (JSONL).

Every stream of a batch is read into one buffer and split once in Arrow, never per line.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import Executor, Future
from dataclasses import dataclass

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from batch.sources.base import Stream

BOM = b"\xef\xbb\xbf"


LINE_SCHEMA = {
    "file_idx": pl.Int32,
    "line": pl.Int64,
    "byte_offset": pl.Int64,
    "byte_length": pl.Int64,
    "text": pl.String,
    "raw": pl.Binary,
    "utf8_ok": pl.Boolean,
    "has_newline": pl.Boolean,
}


@dataclass
class Lines:
    """The lines of a batch's streams, and what reading each one found."""

    lines: pl.DataFrame
    digests: list[Future[str]]  # sha256 of the bytes read, per file
    sizes: list[int]  # bytes read, per file: a file that grew since discovery is read as it was then
    boms: list[bool]  # the file began with a UTF-8 byte order mark, stripped from its first line
    errors: list[str | None]  # why a file could not be read (it then has no lines)


def read_lines(streams: list[Stream], hasher: Executor | None = None) -> Lines:
    """Split the streams of a batch into physical lines with file index, 1-based line number and byte offset.

    `file_idx` is the stream's index in `streams`. All streams are read into one buffer and split
    once in Arrow, never per line; only the lines of a stream that is not valid UTF-8 are decoded
    one by one (with replacement characters; their raw bytes are kept). Each stream's sha256 is computed on `hasher` when given, so hashing overlaps
    with the next steps (hashlib releases the GIL). A byte order mark is not part of the first
    line: its bytes are skipped (offsets stay those of the file).
    """
    files = streams  # a stream is a file here, by the name its lines keep (file_idx)
    buffer = bytearray(sum(f.size for f in files))
    view = memoryview(buffer)
    starts, digests, sizes, errors, position = [0], [], [], [], 0
    for f in files:
        got, error = 0, None
        try:
            with f.open() as fh:
                # at most the size discovery saw: a live transcript that grows is read as it was
                got = fh.readinto(view[position : position + f.size]) or 0
        except OSError as exc:
            error = f"cannot be read ({exc.strerror})"
        chunk = view[position : position + got]
        digests.append(hasher.submit(_sha256, chunk) if hasher else _done(_sha256(chunk)))
        sizes.append(got)
        errors.append(error)
        position += got
        starts.append(position)
    boms = [buffer[a : a + 3] == BOM and b - a >= 3 for a, b in zip(starts, starts[1:])]
    if not position:
        return Lines(pl.DataFrame(schema=LINE_SCHEMA), digests, sizes, boms, errors)
    # one Arrow value per file, over the same buffer; split once into lines
    per_file = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(files), [None, pa.array(starts, pa.int64()).buffers()[1], pa.py_buffer(view[:position])]
    )
    pieces = pc.split_pattern(per_file, pattern=b"\n")
    # a file ending in a newline (and an empty file) splits into one empty piece after its last line
    ends_newline = [a == b or buffer[b - 1] == 10 for a, b in zip(starts, starts[1:])]
    file_idx = pl.col("file_idx")
    at_bom = (pl.col("line") == 1) & pl.lit(pl.Series(boms, dtype=pl.Boolean)).gather(file_idx)
    frame = (
        pl.DataFrame(
            {
                "file_idx": pl.int_range(0, len(files), eager=True, dtype=pl.Int32)
                .repeat_by(pl.from_arrow(pc.list_value_length(pieces)).cast(pl.UInt32))
                .explode(),
                "raw": pl.from_arrow(pieces.flatten()).cast(pl.Binary),
            }
        )
        .with_columns(
            line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(file_idx),
            byte_length=pl.col("raw").bin.size().cast(pl.Int64),
            last=file_idx != file_idx.shift(-1, fill_value=-1),
        )
        .filter(~(pl.col("last") & pl.lit(pl.Series(ends_newline, dtype=pl.Boolean)).gather(file_idx)))
        .with_columns(
            byte_offset=(pl.col("byte_length") + 1).cum_sum().over(file_idx) - pl.col("byte_length") - 1,
            has_newline=~pl.col("last"),
        )
        .with_columns(
            raw=pl.when(at_bom).then(pl.col("raw").bin.slice(3)).otherwise(pl.col("raw")),
            byte_offset=pl.col("byte_offset") + pl.when(at_bom).then(3).otherwise(0),
            byte_length=pl.col("byte_length") - pl.when(at_bom).then(3).otherwise(0),
        )
    )
    try:
        frame = frame.with_columns(text=pl.col("raw").cast(pl.String), raw=pl.lit(None, pl.Binary), utf8_ok=pl.lit(True))
    except pl.exceptions.ComputeError:
        frame = _decode_lossy(frame)
    return Lines(frame.select(list(LINE_SCHEMA)).cast(LINE_SCHEMA), digests, sizes, boms, errors)


def _sha256(data: memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _done(value: str) -> Future[str]:
    future: Future[str] = Future()
    future.set_result(value)
    return future


def _decode_lossy(frame: pl.DataFrame) -> pl.DataFrame:
    # Rare path: a file of the batch is not valid UTF-8. Each file is cast at once; only the lines
    # of a file that fails are decoded one by one (with replacement characters; raw bytes kept).
    parts = []
    for part in frame.partition_by("file_idx", maintain_order=True):
        try:
            parts.append(part.with_columns(text=pl.col("raw").cast(pl.String), raw=pl.lit(None, pl.Binary), utf8_ok=pl.lit(True)))
            continue
        except pl.exceptions.ComputeError:
            pass
        texts, raws, oks = [], [], []
        for b in part.get_column("raw").to_list():
            try:
                texts.append(b.decode("utf-8"))
                raws.append(None)
                oks.append(True)
            except UnicodeDecodeError:
                texts.append(b.decode("utf-8", errors="replace"))
                raws.append(b)
                oks.append(False)
        parts.append(part.with_columns(
            text=pl.Series(texts, dtype=pl.String), raw=pl.Series(raws, dtype=pl.Binary),
            utf8_ok=pl.Series(oks, dtype=pl.Boolean),
        ))
    return pl.concat(parts)
