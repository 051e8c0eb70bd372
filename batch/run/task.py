"""The unit of work: one batch, described in full by a `Task` and converted by `run` wherever it is
sent (a thread of this process, a Dask worker on this machine or another one).

A task holds its session groups' units (each reads its own bytes from its provenance: a file path,
or a Git repository and blob IDs), the run folder and the options; it pickles. `run` converts the
units with each stream format's converter and writes one part file per table into the run folder,
under the batch's part name, which depends only on its session groups (`reuse.part_id`): written
under temporary names and renamed once whole (`output.parts.BatchFiles`), so a task retried or run twice
never duplicates a row. It returns a `TaskResult`: row counts, inputs, skipped paths and each
part's rows per group, never the rows themselves.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from batch import reuse, sql
from batch.formats import claude_code
from batch.incremental import carving
from batch.incremental.state import InputEntries
from batch.run.memory import Stop, connect
from batch.schema import TABLES, TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import Loaded, Stream, Unit
from batch.sources.claude_code import ToolResults
from batch.sources.registry import FORMATS
from batch.transforms import tail
from batch.output.parts import WRITE_SLICE_BYTES, BatchFiles, PartWriter


@dataclass(frozen=True)
class Task:
    """One batch to convert: everything `run` needs, in a form that pickles."""

    part: str  # the name of its part files
    units: tuple[Unit, ...]
    run_folder: Path
    tool_results: ToolResults  # the tool-results/ files found (a file of the run folder)
    share: int = 1  # batches that share the CPUs of the machine it runs on (1: it has them all)
    memory: int | None = None  # DuckDB's memory limit (--memory-mb)
    max_line: int | None = None  # lines longer than this are rejected undecoded (a last retry)

    @property
    def owners(self) -> list[str]:
        return sorted({u.owner for u in self.units})

    def run(self, stop: Stop) -> TaskResult:
        """Convert the batch into part files of its run folder (see the module's docstring)."""
        try:
            with BatchFiles(self.run_folder, self.part) as files:
                batch = convert_batch(
                    list(self.units), files, self.part, self.tool_results, hasher(), self.share, stop,
                    self.memory, self.max_line,
                )
                work = files.commit()
        except Exception as exc:
            if stop.event.is_set() or not sql.out_of_memory(exc):
                raise
            return TaskResult(self.part, self.owners, InputEntries(), {}, [], None, [], out_of_memory=str(exc))
        return TaskResult(self.part, self.owners, InputEntries(batch.inputs), batch.counts, batch.skipped, batch.rows, work)


@dataclass
class TaskResult:
    """What a task wrote, for the run's state and manifest; `out_of_memory` (DuckDB's error) when
    the batch did not fit, in which case it wrote nothing."""

    part: str
    owners: list[str]
    # the manifest's entries of the files it read, as their JSON text: the process that takes the
    # result never holds them as objects (docs/performance.md, "A cluster run, on paper")
    inputs: InputEntries
    counts: dict[str, int]
    skipped: list[tuple[str, str]]
    rows: dict[str, list[int]] | None  # each part's rows per group (`carving.RowsByGroup`)
    work: list[str]  # the work tables it wrote a part of
    out_of_memory: str | None = None


@dataclass
class Converted:
    """A batch converted (`convert_batch`): its inputs, skipped paths, row counts and rows per group."""

    units: list[Unit]
    inputs: list[dict]
    counts: dict[str, int]
    skipped: list[tuple[str, str]]
    rows: dict[str, list[int]] | None = None


# A table left in DuckDB is read as Arrow this many rows at a time, and written a row group each
# RELATION_SLICE_BYTES of Arrow data, about as a frame's slices of text are (output/parts.py WRITE_SLICE_BYTES).
RELATION_BATCH_ROWS = 4096
RELATION_SLICE_BYTES = WRITE_SLICE_BYTES

_STOP = Stop()  # a task run in a process of its own is stopped by ending the process
# files are hashed on one more thread per process, shared by the batches it runs (started when first used)
_HASHER = ThreadPoolExecutor(1, thread_name_prefix="asr-hash")


def hasher() -> Executor:
    return _HASHER


def run(task, stop: Stop | None = None):
    """Run `task` (a `Task`, a grown group's delta: batch/incremental/deltas.py `DeltaTask`, or a
    previous batch's carving: batch/incremental/carving.py `CarveTask`) by its own `run`. `stop`: the
    run's stop, when the task runs in the run's own process."""
    return task.run(stop or _STOP)


def run_pickled(payload: bytes) -> TaskResult:
    """`run` of a task given as its pickle (batch/run/executors.py, `Dask.submit`)."""
    return run(pickle.loads(payload))


def convert_batch(
    units: list[Unit], output, index: str, tool_results: ToolResults, hasher: Executor, workers: int,
    stop: Stop, memory: int | None = None, max_line: int | None = None,
) -> Converted:
    """Convert a batch's units on a DuckDB connection of its own into `output` (`output.parts.BatchFiles`, or
    a capture of the frames: `deltas.Captured`); `workers` batches share the CPUs."""
    # sql.holds: from records_full to its release the batch runs its large statements alone (a batch
    # that fails before its release ends its hold on the way out)
    with connect(workers, spill=output.spill, memory=memory) as con, stop.watch(con), sql.holds():
        if max_line is not None:  # lines longer than this are rejected undecoded (formats/claude_code/converter.py)
            sql.set_max_line(con, max_line)
        return convert_on(con, units, output, index, tool_results, hasher)


def convert_on(
    con: duckdb.DuckDBPyConnection, units: list[Unit], output, index: str, tool_results: ToolResults,
    hasher: Executor,
) -> Converted:
    """Load the batch's units, convert their streams with each format's converter, and write one part per
    table (`BatchParts`), each format's frames as soon as it returns them."""
    loaded = Loaded()
    for unit in units:
        loaded.extend(unit.load())
    inputs, skipped = list(loaded.inputs), []
    by_format: dict[str, list[Stream]] = {}
    for stream in loaded.streams:
        by_format.setdefault(stream.producer_source, []).append(stream)
    groups = reuse.fingerprints(units)
    parts = BatchParts(output, index, sorted(groups))
    try:
        for name in sorted(by_format):
            # the Claude Code converter writes each of its tables from DuckDB as soon as it is done
            writes = {"write": partial(parts.add_relation, con)} if name == claude_code.FORMAT else {}
            converted = FORMATS[name](con, by_format[name], tool_results=tool_results, hasher=hasher, **writes)
            # the statements are done: what the connection holds (registered frames, temporary tables and
            # the memory DuckDB keeps for reuse) is released before the frames are written
            sql.release(con)
            for table in list(converted.tables):
                parts.add(table, converted.tables.pop(table))  # each frame released once written
            inputs.extend(converted.inputs)
            skipped.extend(converted.skipped)
            del converted
        for table, frames in loaded.frames.items():
            for frame in frames:
                parts.add(table, frame)
        counts = parts.close()
    except BaseException:
        parts.abort()
        raise
    # each part's rows per group, recorded in the reuse state: a later run that carves this batch,
    # or re-runs a group of it as a delta, takes them from there instead of reading the key columns
    rows = parts.rows.result(carving.key_owners(groups, inputs, skipped, {}))
    return Converted(units, inputs, counts, skipped, rows)


class BatchParts:
    """A batch's parts, written as its tables are handed over: one part per output table, appended
    to a piece at a time (`PartWriter`), so that no piece is held once written; the rows without a
    seq wait for the batch's last (`tail.Tail`). The work tables, a few narrow rows per stream or
    inference, are written whole at the end. Counts each part's rows, and its rows per group."""

    def __init__(self, output, index: str, groups: list[str]) -> None:
        self.output, self.index = output, index
        self.rows = carving.RowsByGroup(groups)
        self.tail = tail.Tail()
        self.writers: dict[str, PartWriter] = {}
        self.work: dict[str, list[pl.DataFrame]] = {}

    def add(self, name: str, frame: pl.DataFrame) -> None:
        """Write a piece of table `name` (an output table, or a work table: batch/schema/work.py)."""
        if name in WORK_SCHEMAS:
            self.work.setdefault(name, []).append(frame)
            return
        frame = self.tail.pass_on(name, frame)
        if frame is not None:
            self._append(name, frame)

    def add_relation(
        self, con: duckdb.DuckDBPyConnection, name: str, relation: str,
        restore: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    ) -> None:
        """Write table `name` from the DuckDB relation `relation`: its declared columns, read as Arrow
        `RELATION_BATCH_ROWS` rows at a time and written a row group each `RELATION_SLICE_BYTES` of
        them, its rows per group counted in DuckDB. A work table, or a table with rows the tail holds
        (a null seq), goes through `add` as a frame. `restore`: applied to each frame written (the
        strings elided before the decode put back, transforms/elide.py)."""
        if name in WORK_SCHEMAS or (
            name in ("records", "session_events")
            and con.sql(f'select count(*) from "{relation}" where seq is null').fetchall()[0][0]
        ):
            frame = con.sql(f'select * from "{relation}"').pl()
            self.add(name, frame if restore is None else restore(frame))
            return
        table = TABLES_BY_NAME[name]
        columns = ", ".join(f'"{c}"' for c in table.names)
        if name == "records":
            self.tail.placed(con.sql(f'select session_key, max(seq) as last from "{relation}" group by all').pl())
        keys = ", ".join(f'"{k}"' for k in carving.CARVE_KEYS if k in table.names) or "null as no_key"
        self.rows.add_counted(name, con.sql(f'select {keys}, count(*) as _n from "{relation}" group by all').pl())
        writer = self._writer(name)
        restored = (lambda table: table) if restore is None else (lambda table: restore(pl.from_arrow(table)))
        pending, size = [], 0
        with con.sql(f'select {columns} from "{relation}"').to_arrow_reader(batch_size=RELATION_BATCH_ROWS) as reader:
            schema = reader.schema
            for batch in reader:
                pending.append(batch)
                size += batch.nbytes
                if size >= RELATION_SLICE_BYTES:
                    writer.append(restored(pa.Table.from_batches(pending, schema)))
                    pending, size = [], 0
        if pending:
            writer.append(restored(pa.Table.from_batches(pending, schema)))

    def _writer(self, name: str) -> PartWriter:
        if name not in self.writers:
            table = TABLES_BY_NAME.get(name)
            if table is None or table.stage != "batch":
                raise ValueError(f"{name} is not a table a batch writes")
            self.writers[name] = self.output.open(table, self.index)
        return self.writers[name]

    def _append(self, name: str, frame: pl.DataFrame) -> None:
        self._writer(name).append(frame)
        self.rows.add(name, frame)

    def close(self) -> dict[str, int]:
        """Write what is held and close the parts; return each output table's row count."""
        for name, frame in self.tail.rest().items():
            self._append(name, frame)
        self._close_parts()
        for name, schema in WORK_SCHEMAS.items():
            if name in self.work:
                data = pl.from_arrow(cast(schema, self.work.pop(name)))
                self.output.write_work(name, data, self.index)
                self.rows.add(carving.part_label(name, True), data)
        return {t.name: self.writers[t.name].rows for t in TABLES if t.name in self.writers}

    def abort(self) -> None:
        """Close the parts of a failed batch (`BatchFiles.abort` removes them)."""
        self._close_parts()

    def _close_parts(self) -> None:
        for writer in self.writers.values():
            writer.close()


def cast(schema: pa.Schema, frames: list[pl.DataFrame]) -> pa.Table:
    """Frames as one Arrow table with exactly the schema's columns and types."""
    return pa.concat_tables([f.to_arrow().select(schema.names).cast(schema) for f in frames])
