"""The DuckDB catalog of an output folder: OUT/asr.duckdb, one view per table.

The catalog is written into the run's temporary folder before the swap, with views that name
the files at their final place (absolute paths, so it opens from any working directory). Those
files do not exist yet when the views are created: `allow_empty` is true only while the
variable `asr_building` is set, so the build binds and a later query of a missing folder fails
loudly instead of returning an empty table.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from batch.schema import TABLES

CATALOG = "asr.duckdb"
BUILDING = "asr_building"


def _quote(path: Path) -> str:
    # DDL takes no parameters: the path is a literal, quoted by doubling single quotes.
    return "'" + str(path).replace("'", "''") + "'"


def view_sql(out: Path) -> list[str]:
    """Return `create view` statements exposing every table of the output folder `out` by name."""
    return [
        f"create or replace view {t.name} as select * from read_parquet("
        f"{_quote(out / t.name / '*.parquet')}, allow_empty = coalesce(getvariable('{BUILDING}'), false))"
        for t in TABLES
    ]


def write_catalog(folder: Path, out: Path) -> None:
    """Write `folder`/asr.duckdb with views over the tables as they will stand in `out`."""
    path = folder / CATALOG
    path.unlink(missing_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute(f"set variable {BUILDING} = true")
        for stmt in view_sql(out):
            con.execute(stmt)
