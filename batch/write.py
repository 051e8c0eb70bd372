"""The one place that writes: Parquet part files, the manifest, the DuckDB catalog, the swap."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from batch.catalog import write_catalog
from batch.errors import OutputError
from batch.schema import TABLES, Table

WORK = "_work"
MANIFEST = "manifest.json"


class SchemaMismatch(Exception):
    """A relation does not have the columns or types its output table declares: a bug, not bad input."""


def _family(t: pa.DataType) -> str:
    """The kind of value a type holds; a cast is allowed only within one kind."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
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


class Output:
    """A run's output: written into a temporary sibling folder, swapped in by `commit`.

    A crash or Ctrl-C before `commit` leaves the previous output untouched.
    """

    def __init__(self, out: Path) -> None:
        self.out = out.resolve()
        _check_target(self.out)
        self.tmp = self.out.with_name(f".{self.out.name}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            self.tmp.mkdir(parents=True)
        except OSError as exc:
            raise OutputError(f"{out}: cannot create the output folder ({exc.strerror}). Pass a writable --out.") from exc

    def part(self, table: str, index: int, *, work: bool = False) -> Path:
        folder = self.tmp / (f"{WORK}/{table}" if work else table)
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"part-{index:05d}.parquet"

    def glob(self, table: str, *, work: bool = False) -> str:
        return str(self.tmp / (f"{WORK}/{table}" if work else table) / "*.parquet")

    def has(self, table: str, *, work: bool = False) -> bool:
        folder = self.tmp / (f"{WORK}/{table}" if work else table)
        return folder.is_dir() and any(folder.iterdir())

    def write(self, table: Table, data: pl.DataFrame | pa.Table, index: int = 0) -> int:
        """Write one part of an output table in its declared schema (see `conform`); return the row count."""
        arrow = conform(table, data.to_arrow() if isinstance(data, pl.DataFrame) else data)
        pq.write_table(arrow, self.part(table.name, index), compression="zstd")
        return arrow.num_rows

    def write_work(self, name: str, data: pl.DataFrame, index: int) -> None:
        """Write one part of an intermediate table used by the cross-batch steps."""
        data.write_parquet(self.part(name, index, work=True), compression="zstd")

    def write_manifest(self, manifest: dict) -> None:
        (self.tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")

    def commit(self) -> None:
        """Drop intermediates, fill empty tables, build the catalog, and swap the new output in."""
        shutil.rmtree(self.tmp / WORK, ignore_errors=True)
        for table in TABLES:
            if not self.has(table.name):
                self.write(table, table.schema.empty_table())
        write_catalog(self.tmp, self.out)
        old = None
        if self.out.exists():
            old = self.out.with_name(f".{self.out.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(self.out, old)
        os.replace(self.tmp, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder. Pass a folder path to --out.")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise OutputError(
            f"{out}: is a non-empty folder that is not an asr-batch output. "
            "Pass an empty or new folder to --out, so nothing of yours is replaced."
        )
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise OutputError(f"{out}: cannot write in {parent}. Pass a writable --out.")
