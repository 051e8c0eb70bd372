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
        """Write one part of an output table, cast to its schema; return the row count."""
        arrow = data.to_arrow() if isinstance(data, pl.DataFrame) else data
        arrow = arrow.select(table.names).cast(table.schema)
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
