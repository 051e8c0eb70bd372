"""Load SQL files by name and run them on a DuckDB connection.

Each file in sql/ defines one relation and ends in `select * from final`; a failure names the file.
"""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path

import duckdb
import polars as pl

from batch.errors import SqlError

# DuckDB warns that Arrow output of an executed statement copies the rows; that copy costs less
# than binding the statement a second time (see `frame`).
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)


def sql_dir() -> Path:
    """Return the folder of SQL files: inside the installed package, else the checkout's sql/."""
    packaged = Path(__file__).parent / "sql"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "sql"


@cache
def load(name: str) -> str:
    """Return the text of sql/<name>.sql."""
    path = sql_dir() / f"{name}.sql"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SqlError(f"sql/{name}.sql cannot be read ({exc.strerror}); reinstall asr-batch.") from exc


def register(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    """Make a Polars frame readable as `name` without copying its strings.

    `con.register(name, frame)` would convert the frame to Arrow with plain strings, a copy of
    every string (for a batch, all of its JSON text); as Arrow string views the buffers are shared.
    """
    con.register(name, frame.to_arrow(compat_level=pl.CompatLevel.newest()))


def relation(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> duckdb.DuckDBPyRelation:
    """Run sql/<name>.sql and return it as a relation."""
    try:
        return con.sql(load(name), params=params) if params else con.sql(load(name))
    except duckdb.Error as exc:
        raise SqlError(f"sql/{name}.sql failed: {exc}") from exc


def frame(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> pl.DataFrame:
    """Run sql/<name>.sql and return the result as a Polars frame.

    The statement is executed directly: `con.sql(...).pl()` would bind it twice (once for the
    relation, once to run it), a fixed cost of tens of milliseconds per statement and batch.
    """
    try:
        return pl.from_arrow(con.execute(load(name), params or {}).to_arrow_table())
    except duckdb.Error as exc:
        raise SqlError(f"sql/{name}.sql failed: {exc}") from exc


def materialize(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> None:
    """Run sql/<name>.sql into a temporary table of the same name."""
    try:
        con.execute(f'create or replace temp table "{name}" as\n' + load(name), params or {})
    except duckdb.Error as exc:
        raise SqlError(f"sql/{name}.sql failed: {exc}") from exc


def view(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Define sql/<name>.sql as a temporary view of the same name."""
    try:
        con.execute(f'create or replace temp view "{name}" as\n' + load(name))
    except duckdb.Error as exc:
        raise SqlError(f"sql/{name}.sql failed: {exc}") from exc
