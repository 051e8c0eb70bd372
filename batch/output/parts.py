"""Parquet part files: a part written a piece at a time in its table's declared schema
(`PartWriter`, `conform`), and a batch's parts written by the task that converts it, under
temporary names until the batch is whole (`BatchFiles`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from batch import slices
from batch.sql import quote
from batch.errors import OutputError
from batch.output.layout import MARKER, SPILL, WORK
from batch.schema import Table

# A part is written in slices of rows holding about this many bytes of text, a row group each
# (Output.write): the cast to the declared types copies one slice at a time.
WRITE_SLICE_BYTES = 16 << 20


def _slices(frame: pl.DataFrame, size: int) -> list[pl.DataFrame]:
    """`frame` as consecutive slices of rows, about `size` bytes of text (its strings and binaries)
    each; one slice when it holds less."""
    lengths = [
        pl.col(name).str.len_bytes() if dtype == pl.String else pl.col(name).bin.size()
        for name, dtype in frame.schema.items()
        if dtype in (pl.String, pl.Binary)
    ]
    if not lengths:
        return [frame]
    texts = frame.select(pl.sum_horizontal(lengths)).to_series()
    return [frame.slice(start, end - start) for start, end in slices.ranges(texts, size)]


class PartWriter:
    """One part file of an output table, written a piece at a time in its declared schema (see
    `conform`): a batch hands over a table's rows in as many pieces as it makes them, and none is
    held once written. The file holds the declared schema and no row until something is appended.

    A frame is taken as Arrow string views, which share its buffers, and written a slice of rows
    at a time (a row group each): only the slice being written is cast to the declared types, so
    the write copies one slice's text at a time, not the whole piece's at once.
    """

    def __init__(self, path: Path, table: Table) -> None:
        self.table, self.rows = table, 0
        self._writer = pq.ParquetWriter(path, table.schema, compression="zstd", write_statistics=table.statistics)

    def append(self, data: pl.DataFrame | pa.Table) -> int:
        """Write `data` after the rows already written; return its row count."""
        pieces = [data] if isinstance(data, pa.Table) else [
            piece.to_arrow(compat_level=pl.CompatLevel.newest()) for piece in _slices(data, WRITE_SLICE_BYTES)
        ]
        for piece in pieces:
            self._writer.write_table(conform(self.table, piece))
        rows = sum(piece.num_rows for piece in pieces)
        self.rows += rows
        return rows

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BatchFiles:
    """The part files of one batch (a task, batch/run/task.py) in a run folder, written by whichever
    process runs it: each under a temporary name (`TEMPORARY_RE`) until `commit` renames them all to
    the batch's part name, so that a task run twice (retried after its worker died, or run by two
    workers at once) leaves one copy of its rows, and a task that fails leaves none. Takes the place
    of the `Output` for a batch: `open`, `write_work` and `spill` (a spill folder of its own)."""

    def __init__(self, run_folder: Path, part: str) -> None:
        self.root, self.part = Path(run_folder), part
        self._token = uuid.uuid4().hex[:12]
        self._written: list[tuple[Path, Path]] = []  # (temporary, part)
        self.spill = self.root / SPILL / f"{part}-{self._token}"

    def _path(self, table: str, work: bool) -> Path:
        self._check()
        folder = self.root / WORK / table if work else self.root / table
        if work:
            (self.root / WORK).mkdir(exist_ok=True)
        folder.mkdir(exist_ok=True)  # never the run folder itself: a removed one stays removed
        path = folder / f".part-{self.part}.parquet.{self._token}"
        self._written.append((path, folder / f"part-{self.part}.parquet"))
        return path

    def _check(self) -> None:
        if not (self.root / MARKER).is_file():
            raise OutputError(f"{self.root}: the run folder is gone (the run was stopped); nothing more is written")

    def open(self, table: Table, index: object = None) -> PartWriter:
        return PartWriter(self._path(table.name, False), table)

    def write_work(self, name: str, data: pl.DataFrame, index: object = None) -> None:
        data.write_parquet(self._path(name, True), compression="zstd")

    def link(self, source: Path, table: str, *, work: bool = False) -> None:
        """Take the part file `source` of the previous output as it is (`link_or_copy`)."""
        link_or_copy(source, self._path(table, work))

    def commit(self) -> list[str]:
        """Rename every file written to its part name; return the work tables written."""
        self._check()
        for temporary, path in self._written:
            os.replace(temporary, path)
        shutil.rmtree(self.spill, ignore_errors=True)
        return sorted(path.parent.name for _, path in self._written if path.parent.parent.name == WORK)

    def __enter__(self) -> BatchFiles:
        return self

    def __exit__(self, kind, error, trace) -> None:
        """A block that fails (an error, a signal) leaves nothing written (`abort`)."""
        if kind is not None:
            self.abort()

    def abort(self) -> None:
        """Remove what was written (a failed task: it is converted again, or the run stops)."""
        for temporary, _ in self._written:
            with contextlib.suppress(OSError):
                temporary.unlink()
        shutil.rmtree(self.spill, ignore_errors=True)


def link_or_copy(source: Path, target: Path) -> None:
    """A new name for the same bytes (a hard link), else a copy (another file system)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


class SchemaMismatch(Exception):
    """A relation does not have the columns or types its output table declares: a bug, not bad input."""


def _family(t: pa.DataType) -> str:
    """The kind of value a type holds; a cast is allowed only within one kind."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_timestamp(t):
        # an instant; UTC and Etc/UTC name the same zone
        return "timestamp" if t.tz in ("UTC", "Etc/UTC", "+00:00") else f"timestamp[{t.tz}]"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return f"list<{_family(t.value_type)}>"
    return str(t)


# DuckDB's name of each Arrow type the output tables declare (batch/schema)
_DUCKDB_TYPES = {
    pa.bool_(): "boolean", pa.int64(): "bigint", pa.float64(): "double", pa.string(): "varchar",
    pa.large_string(): "varchar", pa.large_binary(): "blob", pa.timestamp("us", tz="UTC"): "timestamptz",
    pa.list_(pa.string()): "varchar[]",
}


def copy_statement(table: Table, relation: str, path: Path) -> str:
    """The COPY that writes the rows of the DuckDB relation `relation` as the part file `path` of
    `table`: its declared columns, in order, cast to the declared types (a missing column or a cast
    DuckDB refuses is an error naming it), zstd-compressed, in the relation's order."""
    columns = ", ".join(f'cast("{f.name}" as {_DUCKDB_TYPES[f.type]}) as "{f.name}"' for f in table.schema)
    return f"copy (select {columns} from {relation}) to {quote(str(path))} (format parquet, compression zstd)"


def conform(table: Table, data: pa.Table) -> pa.Table:
    """Return `data` with exactly the declared columns, in order, cast to the declared types.

    A column the schema does not declare, a declared column that is missing, a cast between kinds
    of value (text to number, number to text) and a cast that loses values (an overflow, a
    truncation) raise SchemaMismatch naming the table and the column. A null-typed column (all
    null) takes any type.
    """
    declared = table.schema
    extra = [n for n in data.column_names if n not in declared.names]
    missing = [n for n in declared.names if n not in data.column_names]
    if extra or missing:
        parts = [f"undeclared column {table.name}.{n}" for n in extra]
        parts += [f"missing declared column {table.name}.{n}" for n in missing]
        raise SchemaMismatch("; ".join(parts))
    columns = []
    for field in declared:
        column = data.column(field.name)
        if column.type != field.type:
            if _family(column.type) not in ("null", _family(field.type)):
                raise SchemaMismatch(
                    f"{table.name}.{field.name} is {column.type}, declared {field.type}: a cast would change its values"
                )
            try:
                column = column.cast(field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatch(f"{table.name}.{field.name}: lossy cast from {column.type} to {field.type}: {exc}") from exc
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=declared)
