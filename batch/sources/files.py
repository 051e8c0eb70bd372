"""The transcript files discovery found (Claude Code's and Codex rollouts), held as rows of Arrow
files rather than as objects: the process that plans a run holds none of them per file
(docs/performance.md, "A cluster run, on paper").

Discovery adds a row per file as it walks (`FileTable.add`), with what the file's head said, into
one of `BUCKETS` files by its session group, a slice of rows at a time (Arrow IPC: Parquet's writer
keeps about 50 MiB in the process that uses it, and DuckDB's sort of all the rows at once did not
stay within 64 MiB). `units` sorts each bucket's rows by group, appends them to one more file, and
gives one unit of work per group (a Claude Code session with its subagents, in owner order) or per
Codex rollout, whose `load` reads its rows back from that file when its batch runs, in whichever
process runs it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import weakref
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from batch.sources.base import CLAUDE_CODE, Loaded, Opened, Stream, Unit, fingerprint_text, fingerprint_texts

SCHEMA = pa.schema([
    # a path as the file system gives it, whatever its bytes (os.fsencode)
    ("name", pa.string()), ("path", pa.binary()), ("size", pa.int64()), ("mtime_ns", pa.int64()),
    ("stream_kind", pa.string()), ("session_id", pa.string()), ("session_key", pa.string()),
    ("parent_session_id", pa.string()), ("agent_id", pa.string()), ("sidecar", pa.string()),
    ("codec", pa.string()), ("producer_source", pa.string()),
    ("owner", pa.string()),  # the session group: the parent session of a subagent, else its own
    ("sidecar_sha256", pa.string()),  # of the sidecar's text, as the fingerprint holds it
    # what the file's head named (`claude_code.head_ids`), kept in the reuse state's `heads`
    ("head_agent_id", pa.string()), ("head_session_id", pa.string()),
])
STREAM_FIELDS = (
    "name", "size", "stream_kind", "session_id", "session_key", "parent_session_id", "agent_id", "sidecar", "path",
    "mtime_ns", "codec", "producer_source",
)
# Files of rows by session group (CRC-32 of the owner): `units` sorts one at a time in memory, so a
# bucket holds 1/64 of the rows (about 10 MB at 1,000,000 files)
BUCKETS = 64
SLICE_ROWS = 256  # rows of a bucket held before they are written: at most BUCKETS × this at once
BATCH_ROWS = 1024  # rows of the sorted file's record batches: a unit reads one or two


class FileTable:
    """The files found, a row each; written to Arrow IPC files in `folder` (a temporary folder of its
    own when None, removed with the table). `refine(stream, head_session_id)` gives the stream a
    file is read as (a Codex rollout's, told by its first line), or the stream itself."""

    def __init__(self, folder: Path | None = None, *, refine: Callable[[Stream, str | None], Stream] | None = None) -> None:
        self._folder = folder
        self.refine = refine
        self.pending: dict[int, list[dict]] = {}  # bucket -> rows not written yet
        self.writers: dict[int, tuple[pa.OSFile, pa.ipc.RecordBatchStreamWriter]] = {}  # bucket -> its file
        self.count = 0
        self.sorted: str | None = None  # the file `units` wrote, which holds every row then

    @property
    def folder(self) -> Path:
        if self._folder is None:  # removed with the table: its units read their rows while it is there
            self._folder = Path(tempfile.mkdtemp(prefix="asr-batch-files-"))
            weakref.finalize(self, shutil.rmtree, self._folder, ignore_errors=True)
        self._folder.mkdir(parents=True, exist_ok=True)
        return self._folder

    def _bucket(self, n: int) -> str:
        return str(self.folder / f"files-{n:02d}.arrows")

    def add(self, stream: Stream, head: tuple[str | None, str | None]) -> None:
        """Add a file found: its stream as discovery classified it, and the agent and session IDs its head named."""
        if self.sorted is not None:
            raise ValueError("the table's units were made: no file can be added")
        if self.refine is not None:
            stream = self.refine(stream, head[1])
        row = {name: getattr(stream, name) for name in STREAM_FIELDS}
        row["path"] = None if stream.path is None else os.fsencode(stream.path)
        row["owner"] = group_owner(stream)
        row["sidecar_sha256"] = hashlib.sha256(stream.sidecar.encode()).hexdigest() if stream.sidecar else None
        row["head_agent_id"], row["head_session_id"] = head
        bucket = zlib.crc32(row["owner"].encode()) % BUCKETS
        self.pending.setdefault(bucket, []).append(row)
        self.count += 1
        if len(self.pending[bucket]) >= SLICE_ROWS:
            self._write(bucket)

    def _write(self, bucket: int) -> None:
        rows = self.pending.pop(bucket, None)
        if rows:
            if bucket not in self.writers:
                sink = pa.OSFile(self._bucket(bucket), "wb")
                self.writers[bucket] = sink, pa.ipc.new_stream(sink, SCHEMA)
            self.writers[bucket][1].write_table(pa.Table.from_pylist(rows, schema=SCHEMA))

    def _close(self) -> None:
        """Write what is pending and close the buckets' files."""
        self._flush()
        for sink, writer in self.writers.values():
            writer.close()
            sink.close()

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def batches(self, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """The rows, a slice at a time: by bucket, or in the sorted file's order once `units` made it."""
        if self.sorted is not None:
            with pa.memory_map(self.sorted) as source:
                file = pa.ipc.open_file(source)
                for i in range(file.num_record_batches):
                    rows = file.get_batch(i)
                    yield rows.select(columns) if columns is not None else rows
            return
        self._flush()
        for bucket in sorted(self.writers):
            with pa.memory_map(self._bucket(bucket)) as source:
                for rows in pa.ipc.open_stream(source):
                    yield rows.select(columns) if columns is not None else rows

    def _flush(self) -> None:
        """Write what is pending, the buckets' files left open for more."""
        for bucket in list(self.pending):
            self._write(bucket)

    def __iter__(self) -> Iterator[Stream]:
        """The streams."""
        for rows in self.batches(list(STREAM_FIELDS)):
            yield from (_stream(row) for row in rows.to_pylist())

    def among(self, column: str, values: set, columns: list[str] | None = None) -> list[dict]:
        """The rows whose `column` is one of `values`."""
        if not values:
            return []
        wanted = pa.array(sorted(values), SCHEMA.field(column).type)
        found = []
        for rows in self.batches(columns if columns is None or column in columns else [*columns, column]):
            found += rows.filter(pc.is_in(rows[column], wanted)).to_pylist()
        return found

    def streams_named(self, names: set[str]) -> dict[str, Stream]:
        """The streams of the files shown as `names`, by name."""
        return {row["name"]: _stream(row) for row in self.among("name", names, list(STREAM_FIELDS))}

    def heads(self, names: set[str] | None = None, *, producer: str | None = None) -> Iterator[tuple[str, list]]:
        """What the head of each file said (of those shown as `names`, when given; of the files read
        by the format `producer`, when given), as the reuse state holds it: (name, [size, modification
        time in ns, agent ID, session ID])."""
        columns = ["name", "size", "mtime_ns", "head_agent_id", "head_session_id", "producer_source"]
        rows = self.among("name", names, columns) if names is not None else (
            row for rows in self.batches(columns) for row in rows.to_pylist()
        )
        for row in rows:
            if producer is None or row["producer_source"] == producer:
                yield row["name"], [row["size"], row["mtime_ns"], row["head_agent_id"], row["head_session_id"]]

    def units(self) -> list[Unit]:
        """One unit of work per Claude Code session group (a main session with its subagents), ordered
        by owner, then one per Codex rollout, ordered by session and name; each reads its rows when its
        batch runs (`Rows`). The rows are sorted by group a bucket at a time into one file."""
        if self.sorted is not None:
            raise ValueError("the table's units were made already")
        self._close()
        self.sorted = str(self.folder / "files-by-group.arrow")
        grouping = _Grouping(self.sorted)
        order = [("is_other", "ascending"), ("owner", "ascending"), ("session_key", "ascending"), ("name", "ascending")]
        with pa.OSFile(self.sorted, "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
            for bucket in sorted(self.writers):
                with pa.memory_map(self._bucket(bucket)) as source:
                    rows = pa.ipc.open_stream(source).read_all()
                    rows = rows.append_column("is_other", pc.not_equal(rows["producer_source"], CLAUDE_CODE))
                    for piece in rows.sort_by(order).drop_columns(["is_other"]).to_batches(max_chunksize=BATCH_ROWS):
                        writer.write_batch(piece)
                        grouping.batches.append(grouping.row)
                        for row in piece.select(["name", "size", "mtime_ns", "owner", "producer_source"]).to_pylist():
                            grouping.add(row)
                    grouping.close()
                    del rows
                os.unlink(self._bucket(bucket))
        self.writers = {}
        # in the order of the rows' sort, across buckets
        return [unit for _, unit in sorted(grouping.units, key=lambda pair: pair[0])]


class _Grouping:
    """Units made of the sorted rows as they pass (a Claude Code group's rows are consecutive), each
    with the key it sorts by: (a rollout, owner, name)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.units: list[tuple[tuple[bool, str, str], Unit]] = []
        self.batches: list[int] = []  # the first row of each record batch written
        self.row = 0
        self.start, self.owner, self.count, self.size, self.newest = 0, None, 0, 0, 0

    def add(self, row: dict) -> None:
        if row["producer_source"] != CLAUDE_CODE:  # a rollout: a unit of its own, owned by its session
            self.close()
            rows = self._load(self.row, 1)
            self.units.append(((True, row["owner"], row["name"]), Unit(
                row["owner"], row["size"], rows, label=row["name"], fingerprint=rows, newest=row["mtime_ns"] or 0,
            )))
            self.row += 1
            self.start = self.row
            return
        if row["owner"] != self.owner:
            self.close()
            self.owner = row["owner"]
        self.count += 1
        self.size += row["size"]
        self.newest = max(self.newest, row["mtime_ns"] or 0)
        self.row += 1

    def _load(self, start: int, count: int) -> Rows:
        """A unit's `load`: its rows, from the sorted file's row `start` on (in the record batch passing)."""
        batch = len(self.batches) - 1
        while self.batches[batch] > start:  # (a group that began in an earlier record batch)
            batch -= 1
        return Rows(self.path, batch, start - self.batches[batch], count)

    def close(self) -> None:
        """The unit of the group whose rows passed last."""
        if self.count:
            rows = self._load(self.start, self.count)
            # (its fingerprint, its files by name, size, modification time and sidecar digest, told
            # from its rows when the run compares or records it: `Rows.fingerprint_text`)
            self.units.append(((False, self.owner, ""), Unit(
                self.owner, self.size, rows, fingerprint=rows, newest=self.newest,  # (named by its owner)
            )))
        self.start, self.owner, self.count, self.size, self.newest = self.row, None, 0, 0, 0


class Rows:
    """A unit's `load`: its streams, `count` rows of the sorted file at `path` from row `offset` of its
    record batch `batch` on. (A unit is held per group for the whole run: slots take about half the
    memory of a `functools.partial`.)"""

    __slots__ = ("path", "batch", "offset", "count")

    def __init__(self, path: str, batch: int, offset: int, count: int) -> None:
        self.path, self.batch, self.offset, self.count = path, batch, offset, count

    def __call__(self) -> Loaded:
        return Loaded([_stream(row) for row in self._rows(list(STREAM_FIELDS))])

    def fingerprint_text(self, opened: Opened | None = None) -> str:
        """The unit's fingerprint (`fingerprint_text`): per file, its name, size, modification time and
        sidecar digest (none for a Codex rollout). Told from the rows when asked, not held: the run holds
        a group's fingerprint only when it is the previous output's (docs/performance.md). `opened`:
        the sorted file opened already, for many units' (`fingerprint_texts`)."""
        if opened is None:
            return next(fingerprint_texts([self]))
        file = opened.get(self.path, lambda stack: pa.ipc.open_file(stack.enter_context(pa.memory_map(self.path))))
        return fingerprint_text(
            [r["name"], r["size"], r["mtime_ns"], r["sidecar_sha256"] if r["producer_source"] == CLAUDE_CODE else None]
            for r in self._rows(_FINGERPRINTED, file)
        )

    def _rows(self, columns: list[str], file: pa.ipc.RecordBatchFileReader | None = None) -> list[dict]:
        """Its rows, of `columns` (read from `file`, the sorted file opened already, when given)."""
        found, batch, offset = [], self.batch, self.offset
        with contextlib.ExitStack() as stack:
            file = file or pa.ipc.open_file(stack.enter_context(pa.memory_map(self.path)))
            while len(found) < self.count:
                found += file.get_batch(batch).slice(offset, self.count - len(found)).select(columns).to_pylist()
                batch, offset = batch + 1, 0
        return found


_FINGERPRINTED = ["name", "size", "mtime_ns", "sidecar_sha256", "producer_source"]


def _stream(row: dict) -> Stream:
    path = row.pop("path")
    return Stream(**row, path=None if path is None else os.fsdecode(path))


def group_owner(f: Stream) -> str:
    """The session group of a file: its parent session for a subagent transcript, else its own stream."""
    if f.producer_source == CLAUDE_CODE and f.stream_kind == "subagent" and f.parent_session_id:
        return f.parent_session_id
    return f.session_key
