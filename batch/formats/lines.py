"""Bytes to physical lines, columnar: the shared first step of line-based formats (JSONL).

The streams of a batch are read in slices of about READ_SLICE_BYTES of whole lines; each slice is
split in Arrow, never per line, and its buffer released before the next slice is read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from batch.sources.base import Stream

BOM = b"\xef\xbb\xbf"
# the reject reason of a line longer than a batch converted again after running out of memory may decode
LINE_TOO_LONG = "line_too_long"

# Bytes read and split at once: a slice is this many bytes of whole lines (more when one line is
# longer), so reading a batch needs its lines' text plus about two slices, not twice the batch.
READ_SLICE_BYTES = 64 << 20


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


# One file's bytes in a slice: (file_idx, offset in the file, start, end in the slice, the file's last)
Segment = tuple[int, int, int, int, bool]


class LineChunks:
    """The lines of a batch's streams, one read slice at a time: iterating yields a frame of the
    lines of each slice (LINE_SCHEMA; whole lines, about READ_SLICE_BYTES of text, in the order of
    the streams and of their lines; a slice without lines yields nothing). Line numbers, byte offsets,
    the byte order mark and each stream's sha256 carry over from one slice to the next, as for one
    read of the whole stream. After the iteration, `digests`, `sizes`, `boms` and `errors` are those
    of `Lines`; a stream that failed after some of its slices were read is as if it could not be read
    at all (its digest that of no bytes), and its lines already yielded are the caller's to drop
    (`failed`).

    Each stream's sha256 is computed slice by slice on `hasher` when given, so hashing overlaps with
    the split and with what the caller does with a slice's lines (a slice's buffer is released once
    it is hashed, before the next slice is read; hashlib releases the GIL)."""

    def __init__(self, streams: list[Stream], hasher: Executor | None = None) -> None:
        self.streams = streams  # a stream is a file here, by the name its lines keep (file_idx)
        self.hasher = hasher
        self.sizes: list[int] = [0] * len(streams)
        self.errors: list[str | None] = [None] * len(streams)
        self.boms = [False] * len(streams)
        self.digests: list[Future[str]] = [Future() for _ in streams]

    @property
    def failed(self) -> list[int]:
        """The streams (file_idx) that could not be read, or not to their end."""
        return [i for i, error in enumerate(self.errors) if error is not None]

    def __iter__(self) -> Iterator[pl.DataFrame]:
        hashes = [hashlib.sha256() for _ in self.streams]
        lines_before = [0] * len(self.streams)  # a file's lines in the slices before
        hashing: Future[None] | None = None

        def hashed() -> None:
            if hashing is not None:
                hashing.result()

        for data, segments in _slices(self.streams, self.sizes, self.errors, hashed):
            if self.hasher:
                hashing = self.hasher.submit(_hash_slice, data, segments, hashes, self.digests)
            else:
                _hash_slice(data, segments, hashes, self.digests)
            frame = _slice_lines(data, segments, lines_before, self.boms)
            del data
            if frame.height:
                yield frame
            del frame
        for i in self.failed:
            # a file that failed after some of its slices were read: as if it could not be read at all
            self.digests[i].set_result(hashlib.sha256().hexdigest())
            self.boms[i] = False


def read_lines(streams: list[Stream], hasher: Executor | None = None) -> Lines:
    """Split the streams of a batch into physical lines with file index, 1-based line number and byte offset.

    `file_idx` is the stream's index in `streams`. The streams are read in slices of about
    READ_SLICE_BYTES of whole lines (a line never spans two slices, see LineChunks); each slice is
    split once in Arrow, never per line, and the slices' frames are concatenated into one chunk: the
    text stays in each slice's buffers, shared by Polars' string views, not copied (a gather from a
    column of several chunks would copy the texts it takes; the converter gathers lines' texts by
    row). Only the lines of a slice's file that is not valid UTF-8 are decoded one by one (with
    replacement characters; their raw bytes are kept). Each stream's sha256 is computed slice by
    slice on `hasher` when given, overlapping with the split and, for the last slice, with the next
    steps. A byte order mark is not part of the first line: its bytes are skipped (offsets stay those
    of the file).
    """
    chunks = LineChunks(streams, hasher)
    frames = list(chunks)
    failed = chunks.failed
    if failed and frames:
        frames = [frame.filter(~pl.col("file_idx").is_in(failed)) for frame in frames]
    lines = concat_lines(frames)
    return Lines(lines, chunks.digests, chunks.sizes, chunks.boms, chunks.errors)


def concat_lines(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The lines of several slices as one frame of one chunk: each slice's text stays in its own
    buffers (Polars string views), not copied."""
    if not frames:
        return pl.DataFrame(schema=LINE_SCHEMA)
    return pl.concat(frames, rechunk=True) if len(frames) > 1 else frames[0]


def _slices(
    files: list[Stream], sizes: list[int], errors: list[str | None], before_next: Callable[[], None]
) -> Iterator[tuple[memoryview, list[Segment]]]:
    """Read the files into buffers of about READ_SLICE_BYTES and yield each full one up to its last
    whole line, with the segment of each file it holds; the partial line after it begins the next
    buffer. A line longer than a buffer makes its buffer grow to the line's end. A file is read up
    to the size discovery saw; `sizes` and `errors` are filled as the files are read; a file that
    fails has no last segment (its lines of earlier slices are the caller's to drop).
    `before_next` is called before the next buffer is taken (the previous one then released)."""
    slice_bytes = max(1, READ_SLICE_BYTES)
    left = sum(f.size for f in files)  # the most there is still to read
    buffer = bytearray(min(slice_bytes, left))
    view = memoryview(buffer)
    used = 0
    segments: list[Segment] = []
    for i, f in enumerate(files):
        start, offset, got = used, 0, 0  # the file's segment in the buffer, where it is in the file, bytes read
        try:
            with f.open() as fh:
                while got < f.size:
                    if used == len(buffer):
                        cut = buffer.rfind(b"\n", start, used) + 1 or start
                        if not cut:
                            # one line fills the buffer: it grows (to the line's end, at the most)
                            grown = bytearray(used + min(max(used, slice_bytes), left))
                            grown[:used] = view[:used]
                            buffer, view = grown, memoryview(grown)
                            continue
                        if cut > start:
                            segments.append((i, offset, start, cut, False))
                            offset += cut - start
                        carry = bytes(view[cut:used])
                        yield view[:cut], segments
                        del buffer, view
                        segments = []
                        before_next()
                        buffer = bytearray(len(carry) + min(slice_bytes, left))
                        view = memoryview(buffer)
                        view[: len(carry)] = carry
                        start, used = 0, len(carry)
                        del carry
                    got_now = fh.readinto(view[used : used + min(len(buffer) - used, f.size - got)]) or 0
                    if not got_now:
                        break  # the file is shorter than discovery saw
                    used += got_now
                    got += got_now
                    left -= got_now
        except OSError as exc:
            errors[i] = f"cannot be read ({exc.strerror})"
            left -= f.size - got
            used = start  # its bytes in this buffer are dropped
            continue
        left -= f.size - got
        sizes[i] = got
        segments.append((i, offset, start, used, True))
    if segments:
        yield view[:used], segments


def _hash_slice(data: memoryview, segments: list[Segment], hashes: list, digests: list[Future[str]]) -> None:
    """Add a slice's bytes to the sha256 of each file it holds; a file's digest is set at its last segment."""
    try:
        for i, _, start, end, last in segments:
            hashes[i].update(data[start:end])
            if last:
                digests[i].set_result(hashes[i].hexdigest())
    except BaseException as exc:  # a digest waited for is never left unset
        for i, *_ in segments:
            if not digests[i].done():
                digests[i].set_exception(exc)
        raise


def _slice_lines(data: memoryview, segments: list[Segment], lines_before: list[int], boms: list[bool]) -> pl.DataFrame:
    """Split one slice into lines: one Arrow value per segment, over the slice's buffer, split once.
    A segment is whole lines of a file (its last may lack a newline at the file's end); `lines_before`
    (a file's lines in earlier slices, updated here) numbers them and `boms` is set at a file's start."""
    if not len(data):
        return pl.DataFrame(schema=LINE_SCHEMA)
    seg_file, seg_offset, seg_line, ends_newline, seg_bom = [], [], [], [], []
    for i, offset, start, end, _ in segments:
        seg_file.append(i)
        seg_offset.append(offset)
        seg_line.append(lines_before[i])
        # a segment ending in a newline (and an empty one) splits into one empty piece after its last line
        ends_newline.append(start == end or data[end - 1] == 10)
        if offset == 0:
            boms[i] = end - start >= 3 and data[start : start + 3] == BOM
        seg_bom.append(offset == 0 and boms[i])
    bounds = [segments[0][2], *(end for _, _, _, end, _ in segments)]
    per_segment = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(segments), [None, pa.array(bounds, pa.int64()).buffers()[1], pa.py_buffer(data)]
    )
    pieces = pc.split_pattern(per_segment, pattern=b"\n")
    counts = pc.list_value_length(pieces)
    for (i, *_), count, newline in zip(segments, counts.to_pylist(), ends_newline):
        lines_before[i] += count - newline
    seg = pl.col("seg")

    def of_segment(values: list, dtype: pl.DataType) -> pl.Expr:
        return pl.lit(pl.Series(values, dtype=dtype)).gather(seg)

    at_bom = (pl.col("pos") == 0) & of_segment(seg_bom, pl.Boolean)
    frame = (
        pl.DataFrame(
            {
                "seg": pl.int_range(0, len(segments), eager=True, dtype=pl.Int32)
                .repeat_by(pl.from_arrow(counts).cast(pl.UInt32))
                .explode(),
                "raw": pl.from_arrow(pieces.flatten()).cast(pl.Binary),
            }
        )
        .with_columns(
            pos=pl.int_range(0, pl.len(), dtype=pl.Int64).over(seg),
            byte_length=pl.col("raw").bin.size().cast(pl.Int64),
            last=seg != seg.shift(-1, fill_value=-1),
        )
        .filter(~(pl.col("last") & of_segment(ends_newline, pl.Boolean)))
        .with_columns(
            file_idx=of_segment(seg_file, pl.Int32),
            line=of_segment(seg_line, pl.Int64) + pl.col("pos") + 1,
            byte_offset=of_segment(seg_offset, pl.Int64)
            + (pl.col("byte_length") + 1).cum_sum().over(seg)
            - pl.col("byte_length")
            - 1,
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
    return frame.select(list(LINE_SCHEMA)).cast(LINE_SCHEMA)


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
