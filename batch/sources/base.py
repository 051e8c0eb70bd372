"""The seam between sources and the pipeline: streams, units of work, batches.

A source (files on disk, a Git repository) discovers its inputs and hands the pipeline units of
work: one session group each (a main session with its subagents), never split across batches.
Discovery reads little (file sizes, metadata blobs); a unit's bytes are read when its batch runs,
so memory stays bounded by the batch size. A loaded unit is a list of streams, each with its
bytes (or a file to read them from) and where they came from, plus what the source itself knows:
frames of tables the source fills, and losses found at the source (an absent blob, a hash
mismatch), which reach the `losses` table like line-level losses do.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Protocol

import polars as pl
import pyarrow as pa

# the compressed forms of a file read transparently, by the suffix of its name: Codex compresses
# rollouts idle for 7 days into one zstd frame (codex-format.md §14.2)
COMPRESSED = {".zst": "zstd"}
# the format of Claude Code transcripts (formats/claude_code), a stream's unless it says otherwise
CLAUDE_CODE = "claude-code-jsonl"


@dataclass(frozen=True, slots=True, weakref_slot=True)  # slots: one per input file, held by the run
class Stream:
    """One transcript stream of a unit: what it is, in which format, and where its bytes come from."""

    name: str  # shown in the outputs (source_file): <source root name>/<path>, or <repository>/<checkpoint tree path>
    size: int
    stream_kind: str  # main | subagent
    session_id: str  # ASR session ID: sessionId (main) or agentId (subagent)
    session_key: str
    parent_session_id: str | None = None
    agent_id: str | None = None
    sidecar: str | None = None  # the .meta.json text, verbatim
    content_level: str = "full"
    producer_source: str = CLAUDE_CODE  # the format module that converts the bytes
    # a file to read the bytes from when the batch runs, held as text (a Path object takes several
    # times its size, once per input file: docs/performance.md, "A cluster run, on paper")
    path: str | None = None
    data: bytes | None = field(default=None, repr=False)  # the bytes, when read already (Git blobs)
    provenance: tuple[dict, ...] = ()  # where the bytes came from beyond the name: Git blobs, one per chunk
    meta: str | None = None  # JSON object: the stream's _meta (io.entire/checkpoint)
    mtime_ns: int | None = None  # the file's modification time at discovery, in ns (files only)
    # the descriptor of an unnamed temporary file holding the bytes (a file rebuilt from an earlier
    # output), read a slice at a time as a file on disk is; closed, and so removed, with the stream (`spooled`)
    spool: int | None = field(default=None, repr=False, compare=False)
    codec: str | None = None  # the file at `path` is compressed (zstd): its bytes are the decompressed ones

    def __post_init__(self) -> None:
        if self.path is not None and not isinstance(self.path, str):
            object.__setattr__(self, "path", os.fspath(self.path))

    def open(self) -> BinaryIO:
        """A binary reader of the stream's bytes."""
        if self.data is not None:
            return io.BytesIO(self.data)
        if self.spool is not None:
            return io.BufferedReader(_Pread(self.spool))
        if self.path is None:
            raise ValueError(f"{self.name}: a stream needs bytes or a path")
        return open_file(self.path, self.codec)


def open_file(path: str | Path, codec: str | None = None) -> BinaryIO:
    """A binary reader of a file's bytes, decompressed when `codec` names its compression."""
    if codec is None:
        return open(path, "rb")  # noqa: SIM115 (the caller closes it)
    return io.BufferedReader(_Decompressed(path, codec), 1 << 16)


def decompressed_size(path: str | Path, codec: str) -> int:
    """The size of a compressed file's bytes once decompressed (read through to its end)."""
    size = 0
    with open_file(path, codec) as f:
        while block := f.read(1 << 20):
            size += len(block)
    return size


class _Decompressed(io.RawIOBase):
    """A reader of a compressed file's decompressed bytes, across frames (pyarrow's codec). A damaged
    stream (truncated, not of that codec) is an OSError that says so."""

    def __init__(self, path: str | Path, codec: str) -> None:
        self.raw = open(path, "rb")  # noqa: SIM115 (closed with this reader)
        self.stream = pa.CompressedInputStream(pa.PythonFile(self.raw, mode="r"), codec)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self.stream.read(len(buffer))
        except OSError as exc:
            raise OSError(errno.EIO, f"damaged compressed file: {exc}") from exc
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.stream.close()
            self.raw.close()
        super().close()


def spooled(stream: Stream, fd: int) -> Stream:
    """`stream` with its bytes in the unnamed temporary file `fd`, which it owns: closed when it is dropped."""
    found = replace(stream, spool=fd, size=os.fstat(fd).st_size, data=None, path=None)
    weakref.finalize(found, os.close, fd)
    return found


class _Pread(io.RawIOBase):
    """A reader of an open file from its start, at its own offset (`os.preadv`): several readers of one
    file do not move each other, and closing one leaves the file open."""

    def __init__(self, fd: int) -> None:
        self.fd, self.offset = fd, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = os.preadv(self.fd, [buffer], self.offset)
        self.offset += n
        return n


@dataclass
class Loaded:
    """A unit of work with its bytes: streams to convert, and what the source itself contributes."""

    streams: list[Stream] = field(default_factory=list)
    frames: dict[str, list[pl.DataFrame]] = field(default_factory=dict)  # output or work table -> frames
    inputs: list[dict] = field(default_factory=list)  # manifest inputs the source read outside streams

    def add(self, table: str, frame: pl.DataFrame) -> None:
        """Add rows to an output table (or a work table) of the batch."""
        if frame.height:
            self.frames.setdefault(table, []).append(frame)

    def extend(self, other: Loaded) -> None:
        self.streams.extend(other.streams)
        for name, frames in other.frames.items():
            self.frames.setdefault(name, []).extend(frames)
        self.inputs.extend(other.inputs)


@dataclass(slots=True)
class Unit:
    """A session group, not read yet: `load()` reads its bytes when its batch runs."""

    owner: str  # the main session key of the group: units are ordered by it
    size: int  # bytes load() reads, about (used to form batches)
    load: Callable[[], Loaded]
    label: str = ""  # how the unit is named in messages (largest groups)
    # What tells the unit's input apart without reading it (per file: name, size, modification
    # time, digest of its sidecar, as make and rsync do; per Git blob: its ID); None when only reading tells.
    # An incremental run reuses the previous conversion of a group whose fingerprint is unchanged.
    # Its entries (tuples), or their text as the reuse state holds it (`fingerprint_text`), or what tells
    # that text when asked (`fingerprint_of`: a unit's rows of the files table, sources/files.py `Rows`).
    fingerprint: tuple | str | Told | None = None
    newest: int = 0  # the newest modification time of its files, in ns (0 when not known: Git objects)


def fingerprint_text(entries: Iterable) -> str:
    """A fingerprint as the reuse state holds it and a run compares it: its entries as lists, sorted
    by their JSON text, in one JSON array. Held as text, a group's fingerprint takes about a third of
    the memory of its entries as objects (docs/performance.md, "A cluster run, on paper")."""
    return json.dumps(sorted((list(e) if isinstance(e, tuple) else e for e in entries), key=json.dumps),
                      separators=(",", ":"))


class Opened:
    """The files fingerprints are told from, each opened once (`fingerprint_texts`) and closed together."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.stack, self.files = stack, {}

    def get(self, key: object, open_: Callable[[contextlib.ExitStack], object]) -> object:
        """The file `key`, opened by `open_` (which enters it into the stack) the first time it is wanted."""
        if key not in self.files:
            self.files[key] = open_(self.stack)
        return self.files[key]


class Told(Protocol):
    """A fingerprint told when asked, from a file (sources/files.py `Rows`, the reuse state's
    `StoredFingerprint`): opened now, or taken from `opened`."""

    def fingerprint_text(self, opened: Opened | None = None) -> str: ...


def fingerprint_of(fingerprint: tuple | str | Told | None) -> str | None:
    """A fingerprint as the reuse state holds it (`fingerprint_text`), told now when it is told when asked."""
    if fingerprint is None or isinstance(fingerprint, str):
        return fingerprint
    if isinstance(fingerprint, (tuple, list)):
        return fingerprint_text(fingerprint)
    return fingerprint.fingerprint_text()


def fingerprint_texts(fingerprints: Iterable) -> Iterator[str | None]:
    """`fingerprint_of` of each fingerprint, in order; those told when asked told with each file they
    are told from opened once."""
    with contextlib.ExitStack() as stack:
        opened = Opened(stack)
        for fp in fingerprints:
            if fp is None or isinstance(fp, (str, tuple, list)):
                yield fingerprint_of(fp)
            else:
                yield fp.fingerprint_text(opened)


def fingerprint_entries(fingerprint: tuple | str | Told | None) -> list:
    """A fingerprint's entries (lists, when given as text or told); none for None."""
    if fingerprint is not None and not isinstance(fingerprint, (str, tuple, list)):
        fingerprint = fingerprint.fingerprint_text()
    if isinstance(fingerprint, str):
        return json.loads(fingerprint)
    return list(fingerprint or ())


def batches(units: list[Unit], *, max_bytes: int) -> list[list[Unit]]:
    """Group units into batches of at most `max_bytes`; a larger unit is a batch of its own.

    Groups go in the order of their newest file's modification time (then owner), so sessions of
    the same days share batches: the live sessions, which keep growing, are then in few batches,
    and an incremental run leaves the batches of older sessions alone. Units with the same owner
    (one session found in several sources) go to the same batch, so copies of a stream are told
    apart within one batch."""
    groups: dict[str, list[Unit]] = {}
    for unit in units:
        groups.setdefault(unit.owner, []).append(unit)
    newest = {owner: max(u.newest for u in group) for owner, group in groups.items()}
    out: list[list[Unit]] = []
    current: list[Unit] = []
    size = 0
    for owner in sorted(groups, key=lambda o: (newest[o], o)):
        group = groups[owner]
        group_size = sum(u.size for u in group)
        if current and size + group_size > max_bytes:
            out.append(current)
            current, size = [], 0
        current.extend(group)
        size += group_size
    if current:
        out.append(current)
    return out

