"""The line reader (batch/formats/lines.py): a batch read in slices gives the lines, digests, sizes,
byte order marks and errors of a reading in one piece, whatever the slice size."""

from __future__ import annotations

import errno
import hashlib
import io
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from batch.formats import lines
from batch.formats.lines import BOM, LINE_SCHEMA, read_lines
from batch.sources.base import Stream
from batch.sources.claude_code import discover
from conftest import CORPUS, convert_streams

ONE_SLICE = 1 << 40


class _FailingReader(io.BytesIO):
    """A reader whose reads fail once they would reach byte `fail_at` (an I/O error mid-file)."""

    def __init__(self, data: bytes, fail_at: int):
        super().__init__(data)
        self.fail_at = fail_at

    def readinto(self, buffer) -> int:
        self._reaching(len(buffer))
        return super().readinto(buffer)

    def read(self, size: int | None = -1) -> bytes:
        self._reaching(size if size is not None and size >= 0 else len(self.getbuffer()))
        return super().read(size)

    def _reaching(self, size: int) -> None:
        if self.tell() + size > self.fail_at:
            raise OSError(errno.EIO, "Input/output error")


@dataclass(frozen=True)
class FailingStream(Stream):
    fail_at: int = 0

    def open(self):
        return _FailingReader(self.data, self.fail_at)


def stream(name: str, data: bytes, size: int | None = None) -> Stream:
    return Stream(name, len(data) if size is None else size, "main", name, name, data=data)


LONG = b'{"long": "' + b"x" * 9000 + b'"}'
STREAMS = [
    stream("empty", b""),
    stream("objects", b'{"a": 1}\n{"b": 2}\n'),
    stream("no final newline", b'{"a": 1}\n\n{"b": 2}'),
    stream("newline only", b"\n"),
    stream("blank lines", b"\n\n \n\t\n"),
    stream("bom", BOM + b'{"a": 1}\n{"b": 2}\n'),
    stream("bom only", BOM),
    stream("bom and newline", BOM + b"\n"),
    stream("two bytes of a bom", BOM[:2]),
    # with the file before, the first three bytes of the batch here would be a BOM: not this file's
    stream("the third byte", BOM[2:] + b"\n"),
    stream("bom later", b'{"a": 1}\n' + BOM + b'{"b": 2}\n' + BOM),
    stream("invalid utf-8", b'{"a": "\xc3\xa9"}\n\xff\xfe{}\n{"b": 2}\nend \xc3'),
    stream("bom and invalid utf-8", BOM + b"\xff\n" + BOM + b"\xfe"),
    stream("long lines", LONG + b"\n" + b"y" * 5000 + b"\n\n" + LONG),
    stream("crlf", b'{"a": 1}\r\n{"b": 2}\r\n'),
    stream("grown since discovery", b'{"a": 1}\n{"b": 2}\n{"c": 3}\n', size=13),
    stream("shorter than discovery saw", b'{"a": 1}\n{"b', size=64),
    Stream("missing", 10, "main", "missing", "missing", path=Path("/nonexistent/asr-batch/missing.jsonl")),
    FailingStream("fails mid-file", 60, "main", "f", "f", data=BOM + b'{"a": 1}\n{"b": 2}\n' * 3 + b"\n", fail_at=30),
    FailingStream("fails at once", 20, "main", "g", "g", data=b'{"a": 1}\n{"b": 2}\n\n\n', fail_at=0),
    stream("empty again", b""),
    stream("last", b'{"z": 26}'),
]


def by_line(streams: list[Stream]) -> tuple[pl.DataFrame, list[str], list[int], list[bool], list[str | None]]:
    """What read_lines returns, computed line by line in Python: each file read in one piece."""
    rows, digests, sizes, boms, errors = [], [], [], [], []
    for i, s in enumerate(streams):
        error = None
        try:
            with s.open() as fh:
                data = fh.read(s.size)
        except OSError as exc:
            data, error = b"", f"cannot be read ({exc.strerror})"
        digests.append(hashlib.sha256(data).hexdigest())
        sizes.append(len(data))
        errors.append(error)
        boms.append(data[:3] == BOM)
        pieces = data.split(b"\n")
        if data.endswith(b"\n") or not data:
            pieces.pop()
        offset = 0
        for n, piece in enumerate(pieces):
            raw, start = (piece[3:], offset + 3) if n == 0 and boms[-1] else (piece, offset)
            try:
                text, kept, ok = raw.decode("utf-8"), None, True
            except UnicodeDecodeError:
                text, kept, ok = raw.decode("utf-8", errors="replace"), raw, False
            rows.append({
                "file_idx": i, "line": n + 1, "byte_offset": start, "byte_length": len(raw), "text": text,
                "raw": kept, "utf8_ok": ok, "has_newline": n < len(pieces) - 1 or data.endswith(b"\n"),
            })
            offset += len(piece) + 1
    return pl.DataFrame(rows, schema=LINE_SCHEMA), digests, sizes, boms, errors


def read(streams: list[Stream], slice_bytes: int, monkeypatch: pytest.MonkeyPatch, hasher=None):
    """read_lines with slices of `slice_bytes`: its result, and the number of slices read."""
    monkeypatch.setattr(lines, "READ_SLICE_BYTES", slice_bytes)
    slices = 0
    split = lines._slice_lines

    def counted(*args):
        nonlocal slices
        slices += 1
        return split(*args)

    monkeypatch.setattr(lines, "_slice_lines", counted)
    got = read_lines(streams, hasher)
    monkeypatch.setattr(lines, "_slice_lines", split)
    return (got.lines, [d.result() for d in got.digests], got.sizes, got.boms, got.errors), slices


def assert_same(got, expected) -> None:
    assert_frame_equal(got[0], expected[0], check_row_order=True)
    assert got[1:] == expected[1:]


@pytest.mark.parametrize("slice_bytes", [1, 2, 3, 7, 4096, ONE_SLICE])
@pytest.mark.parametrize("threads", [0, 1, 3])
def test_every_slice_size_reads_what_one_reading_reads(slice_bytes, threads, monkeypatch):
    # every case together (a file's bytes next to another's in a slice), in both orders
    for streams in (STREAMS, STREAMS[::-1]):
        if threads:
            with ThreadPoolExecutor(threads) as hasher:
                got, slices = read(streams, slice_bytes, monkeypatch, hasher)
        else:
            got, slices = read(streams, slice_bytes, monkeypatch)
        assert_same(got, by_line(streams))
        assert (slices > 10) == (slice_bytes < 64)


@pytest.mark.parametrize("slice_bytes", [1, 7])
def test_each_case_alone(slice_bytes, monkeypatch):
    for s in STREAMS:
        sliced = read([s], slice_bytes, monkeypatch)[0]
        assert_same(sliced, read([s], ONE_SLICE, monkeypatch)[0])
        assert_same(sliced, by_line([s]))


def test_the_cases_are_there(monkeypatch):
    # the cases above do what their names say
    (lines_, digests, sizes, boms, errors), slices = read(STREAMS, ONE_SLICE, monkeypatch)
    assert slices == 1
    named = {s.name: i for i, s in enumerate(STREAMS)}
    assert [STREAMS[i].name for i, e in enumerate(errors) if e] == ["missing", "fails mid-file", "fails at once"]
    assert [STREAMS[i].name for i, b in enumerate(boms) if b] == ["bom", "bom only", "bom and newline", "bom and invalid utf-8"]
    assert sizes[named["grown since discovery"]] == 13 and sizes[named["shorter than discovery saw"]] == 12
    assert lines_.filter(~pl.col("utf8_ok")).get_column("file_idx").unique().sort().to_list() == [
        named[name] for name in ("two bytes of a bom", "the third byte", "invalid utf-8", "bom and invalid utf-8")
    ]
    assert lines_.get_column("byte_length").max() > 9000
    assert digests[named["missing"]] == hashlib.sha256().hexdigest()


def test_a_line_longer_than_a_slice(monkeypatch):
    # the slice grows to the line's end: 9,012 bytes in one line with slices of 4 KiB
    long = stream("long", b"a\n" + LONG + b"\nb")
    got, slices = read([long], 4096, monkeypatch)
    assert slices == 2
    assert got[0].get_column("byte_length").to_list() == [1, len(LONG), 1]
    assert got[0].get_column("byte_offset").to_list() == [0, 2, 3 + len(LONG)]
    assert_same(got, read([long], ONE_SLICE, monkeypatch)[0])


@pytest.fixture(scope="module")
def corpus_streams() -> list[Stream]:
    streams = list(discover([CORPUS]).files)
    assert len(streams) > 50
    return streams


@pytest.mark.parametrize("slice_bytes", [4096, 1 << 20])
def test_the_corpus_in_slices(corpus_streams, slice_bytes, monkeypatch):
    whole, _ = read(corpus_streams, ONE_SLICE, monkeypatch)
    with ThreadPoolExecutor(1) as hasher:
        sliced, slices = read(corpus_streams, slice_bytes, monkeypatch, hasher)
    assert slices > 10
    assert_same(sliced, whole)
    assert whole[1] == [hashlib.sha256(Path(s.path).read_bytes()).hexdigest() for s in corpus_streams]


def test_the_converter_drops_a_stream_failing_after_its_first_slices(monkeypatch):
    # the converter hands each read slice to DuckDB as it comes: the lines of a stream that fails
    # after some of its slices went through leave no row, as when it cannot be read at all
    monkeypatch.setattr(lines, "READ_SLICE_BYTES", 256)

    def text(session: str, n: int) -> bytes:
        return b"".join(
            json.dumps({
                "type": "user", "uuid": f"{session}-{i}", "parentUuid": None, "sessionId": session,
                "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": f"prompt {i} " + "x" * 40},
            }).encode() + b"\n"
            for i in range(n)
        )

    good, bad = text("s1", 5), text("s2", 20)
    slices = 0
    split = lines._slice_lines

    def counted(*args):
        nonlocal slices
        slices += 1
        return split(*args)

    monkeypatch.setattr(lines, "_slice_lines", counted)

    def convert(fail_at: int):
        files = [
            stream("a.jsonl", good),
            FailingStream("b.jsonl", len(bad), "main", "s2", "s2", data=bad, fail_at=fail_at),
        ]
        return convert_streams(files)

    late = convert(len(bad) - 10)
    assert slices > 5  # the failing stream's first slices went through
    early = convert(0)
    assert late[2] == early[2] == [("b.jsonl", "cannot be read (Input/output error)")]
    assert late[1] == early[1] and len(late[1]) == 1
    assert late[0].keys() == early[0].keys()
    for name in late[0]:
        assert_frame_equal(late[0][name], early[0][name], check_row_order=True)
    assert late[0]["records"].height == 5
