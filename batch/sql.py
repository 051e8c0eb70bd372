"""Load SQL files by name and run them on a DuckDB connection.

Each file in sql/ defines one relation and ends in `select * from final`; a failure names the file.
Its header names the relations it reads (`-- reads: a, b`): other files of sql/, or frames a step
registers on the connection (`register`). `order` derives the order of the files from those headers.
The files may call the macros of sql/macros/, which `define_macros` creates on a connection first.
A file whose result and working memory are large next to its batch says so (`-- result: large`):
`frame` fetches it without a second copy of the rows, and runs one such statement at a time; one that
says `-- result: large, concurrent` (the envelope decode) runs beside them. From a file that says
`-- hold: until release` on, a batch runs the others alone until `release`. A file
may declare the order of its rows instead of ending in ORDER BY (`-- order: a, b`, see `sorted_by`).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from functools import cache
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from batch.errors import SqlError

# DuckDB warns that Arrow output of an executed statement copies the rows; that copy costs less
# than binding the statement a second time (see `frame`).
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)


def quote(text: str) -> str:
    """`text` as a SQL string literal, for statements that take no parameters (DDL, COPY targets)."""
    return "'" + text.replace("'", "''") + "'"


def sql_dir() -> Path:
    """Return the folder of SQL files: inside the installed package, else the checkout's sql/."""
    packaged = Path(__file__).parent / "sql"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "sql"


# The folders of the relations' files, by the stage that runs them: `batch` in each batch's task
# (formats/claude_code/, formats/codex/, formats/entire_events.py), in a folder per step or family of
# tables (decode, records, sessions, activity, hooks, plans, workspace; codex, entire: the other
# formats), `final` in the final stage (run/finalize.py), `archive` where an earlier output is read as
# a source (sources/archive.py), `report` by `asr-batch report` over an output's catalog (batch/report.py).
# A relation's name is its file's name, unique across the stages. sql/views/ (the catalog's views)
# and sql/macros/ (defined on every connection) are read apart.
STAGES = ("batch", "final", "archive", "report")


@cache
def files() -> dict[str, Path]:
    """Each relation's file, by name: sql/<stage>/<name>.sql, or sql/<stage>/<folder>/<name>.sql."""
    found: dict[str, Path] = {}
    for stage in STAGES:
        for path in sorted((sql_dir() / stage).rglob("*.sql")):
            if path.stem in found:
                raise SqlError(f"{_relative(path)} and {_relative(found[path.stem])} define the same relation; rename one.")
            found[path.stem] = path
    return found


def _relative(path: Path) -> str:
    return "sql/" + path.relative_to(sql_dir()).as_posix()


def shown(name: str) -> str:
    """sql/<stage>/[<folder>/]<name>.sql, as messages name a relation's file."""
    path = files().get(name)
    return _relative(path) if path else f"sql/<stage>/{name}.sql"


@cache
def load(name: str) -> str:
    """Return the text of sql/<stage>/<name>.sql."""
    path = files().get(name)
    if path is None:
        raise SqlError(f"no SQL file defines {name} (looked for sql/<stage>/{name}.sql); reinstall asr-batch.")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SqlError(f"{shown(name)} cannot be read ({exc.strerror}); reinstall asr-batch.") from exc


@cache
def macro_texts() -> tuple[tuple[str, str], ...]:
    """(name, text) of every file of sql/macros/, in name order."""
    return tuple((p.stem, p.read_text(encoding="utf-8")) for p in sorted((sql_dir() / "macros").glob("*.sql")))


def define_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create the macros of sql/macros/ (temporary, for this connection) that the files of sql/ call.
    DuckDB expands a macro where it is called, when it binds the statement."""
    for name, text in macro_texts():
        try:
            con.execute(text)
        except duckdb.Error as exc:
            raise SqlError(f"sql/macros/{name}.sql failed: {exc}") from exc


_READS = re.compile(r"^--\s*reads:[ \t]*(.*)$", re.MULTILINE)
_LARGE = re.compile(r"^--\s*result:[ \t]*large(,[ \t]*concurrent)?[ \t]*$", re.MULTILINE)
_ORDER = re.compile(r"^--\s*order:[ \t]*(.*)$", re.MULTILINE)
# Held while a statement with a large result runs (`frame`): batches converted at once (one
# connection each) do not reach their largest statements at the same time.
# A batch holds it from the statement of a file with `-- hold: until release` (records_full) to its
# `release`: then the other batch's largest statements do not meet this batch's frames at their
# largest; its envelope decode (`-- result: large, concurrent`) does, and keeps both CPUs busy
# (docs/decisions/002-two-batches.md).
_ONE_LARGE = threading.RLock()
_HOLD = re.compile(r"^--\s*hold:[ \t]*until release[ \t]*$", re.MULTILINE)
_holding = threading.local()


def names() -> list[str]:
    """Return the relation names of sql/ (the files of its stages, not sql/views/)."""
    return sorted(files())


@cache
def reads(name: str) -> tuple[str, ...]:
    """Return the relations sql/<stage>/<name>.sql declares in its `-- reads:` header."""
    match = _READS.search(load(name))
    if match is None:
        raise SqlError(f"{shown(name)} has no `-- reads:` header; name the relations it reads in it.")
    return tuple(r.strip() for r in match.group(1).split(",") if r.strip())


@cache
def large(name: str) -> bool:
    """Whether sql/<stage>/<name>.sql declares a large result (`-- result: large`)."""
    return _LARGE.search(load(name)) is not None


@cache
def concurrent(name: str) -> bool:
    """Whether sql/<stage>/<name>.sql declares a large result that runs beside the other large
    statements and holds (`-- result: large, concurrent`; docs/decisions/002-two-batches.md)."""
    match = _LARGE.search(load(name))
    return match is not None and match.group(1) is not None


@cache
def held(name: str) -> bool:
    """Whether sql/<stage>/<name>.sql holds the large statements from its run until `release` (`-- hold: until release`)."""
    return _HOLD.search(load(name)) is not None


@contextmanager
def holds() -> Iterator[None]:
    """Within it, this thread's batch holds (`hold`) from a file that says `-- hold: until release`;
    the hold ends at `release` or at the end of the block. Elsewhere (a converter called on its own)
    such a file does not hold."""
    _holding.allowed = True
    try:
        yield
    finally:
        _holding.allowed = False
        unhold()


def hold() -> None:
    """Run the large statements of this thread's batch alone until `unhold` (or `release`): other
    threads wait before their next one. Only within `holds`."""
    if getattr(_holding, "allowed", False) and not getattr(_holding, "on", False):
        _ONE_LARGE.acquire()
        _holding.on = True


def unhold() -> None:
    """Let the other threads run large statements again, if this thread holds them (`hold`)."""
    if getattr(_holding, "on", False):
        _holding.on = False
        _ONE_LARGE.release()


@cache
def sorted_by(name: str) -> tuple[str, ...]:
    """The columns sql/<stage>/<name>.sql declares its rows ordered by (`-- order: a, b`), ascending, nulls last
    (DuckDB's default), or () when it declares none.

    They must tell every row apart (a total order, so the order does not depend on how the rows were
    computed): `frame` sorts the result in Polars, which reorders the rows without copying their
    strings, where an ORDER BY would make DuckDB copy every column of every row into its sort.
    `relation`, `materialize` and `view` append the ORDER BY to the statement."""
    match = _ORDER.search(load(name))
    return tuple(c.strip() for c in match.group(1).split(",") if c.strip()) if match else ()


def _statement(name: str) -> str:
    """The text of sql/<stage>/<name>.sql with the ORDER BY of its declared order, if any."""
    order = sorted_by(name)
    return load(name) + (f"\norder by {', '.join(order)}\n" if order else "")


def topological(
    targets: Iterable[str], reads: Mapping[str, Iterable[str]], *, given: Iterable[str] = (), where: str = "sql"
) -> list[str]:
    """Return the relations of `reads` that `targets` need, each after the relations it reads.

    `reads` maps each relation that can be built to the names it reads; a name in `given` is
    already there. A name that is neither, and a relation that reads itself through others, are
    errors naming the file (`<where>/<name>.sql`). Ties keep the order of `targets`, then of the reads.
    """
    given = set(given)
    ordered: dict[str, None] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered or name in given:
            return
        if name in path:
            cycle = " -> ".join((*path[path.index(name):], name))
            raise SqlError(f"{where}/{name}.sql reads itself through {cycle}; break the cycle in their `-- reads:` headers.")
        if name not in reads:
            reader = f"{where}/{path[-1]}.sql reads" if path else "the pipeline asks for"
            raise SqlError(f"{reader} `{name}`, which is neither a file of {where}/ nor registered before it runs.")
        for dep in reads[name]:
            visit(dep, (*path, name))
        ordered[name] = None

    for target in targets:
        visit(target, ())
    return list(ordered)


def order(targets: Iterable[str], *, given: Iterable[str]) -> list[str]:
    """Return the sql/ files to run, in an order where each follows what it reads, to build `targets`
    from the relations in `given` (frames registered, tables already built)."""
    return topological(targets, {name: reads(name) for name in names()}, given=given)


def _relations(con: duckdb.DuckDBPyConnection, where: str = "true") -> list[tuple[str, str]]:
    """(name, table or view) of the relations readable on `con` that match `where`."""
    return con.sql(
        f"select table_name, 'table' from duckdb_tables() where {where} "
        f"union all select view_name, 'view' from duckdb_views() where not internal and {where}"
    ).fetchall()


def defined(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Return the names readable on `con`: registered frames, temporary tables and views."""
    return {name for name, _ in _relations(con)}


def release(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the temporary tables and views of `con` (registered frames included, which drops the
    references to them), then make DuckDB return the memory it keeps for reuse, and end a `hold`."""
    for name, kind in _relations(con, "temporary"):
        con.execute(f'drop {kind} if exists "{name}"')
    # a large batch's limit (formats/claude_code/converter.py) ends with it; this flushes too
    limit = memory_limit(con)
    con.execute("reset memory_limit" if limit is None else f"set memory_limit = '{limit >> 20} MiB'")
    unhold()


MEMORY_VARIABLE = "asr_memory_limit"


def set_memory_limit(con: duckdb.DuckDBPyConnection, limit: int) -> None:
    """Limit DuckDB's memory on `con` to `limit` bytes, for its statements and their tables."""
    con.execute(f"set memory_limit = '{limit >> 20} MiB'")
    con.execute(f"set variable {MEMORY_VARIABLE} = {int(limit)}")


MAX_LINE_VARIABLE = "asr_max_line_bytes"


def set_max_line(con: duckdb.DuckDBPyConnection, limit: int) -> None:
    """Make the converters on `con` reject lines longer than `limit` bytes without decoding them."""
    con.execute(f"set variable {MAX_LINE_VARIABLE} = {int(limit)}")


def max_line(con: duckdb.DuckDBPyConnection) -> int | None:
    """The limit `set_max_line` set on `con`, None when none was."""
    value = con.sql(f"select getvariable('{MAX_LINE_VARIABLE}')").fetchall()[0][0]
    return None if value is None else int(value)


def memory_limit(con: duckdb.DuckDBPyConnection) -> int | None:
    """The limit `set_memory_limit` set on `con`, None when none was."""
    value = con.sql(f"select getvariable('{MEMORY_VARIABLE}')").fetchall()[0][0]
    return None if value is None else int(value)


def register(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    """Make a Polars frame readable as `name` without copying its strings.

    `con.register(name, frame)` would convert the frame to Arrow with plain strings, a copy of
    every string (for a batch, all of its JSON text); as Arrow string views the buffers are shared.
    """
    con.register(name, frame.to_arrow(compat_level=pl.CompatLevel.newest()))


def relation(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> duckdb.DuckDBPyRelation:
    """Run sql/<stage>/<name>.sql and return it as a relation."""
    try:
        return con.sql(_statement(name), params=params) if params else con.sql(_statement(name))
    except duckdb.Error as exc:
        raise SqlError(f"{shown(name)} failed: {exc}") from exc


def frame(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> pl.DataFrame:
    """Run sql/<stage>/<name>.sql and return the result as a Polars frame.

    The statement is executed directly: `con.sql(...).pl()` would bind it twice (once for the
    relation, once to run it), a fixed cost of 5 to 25 milliseconds per statement on a 48 MiB batch.
    Executed directly, DuckDB first collects the whole result in its own format and then copies it
    to Arrow: two copies of the rows at once. A statement whose result is large (`-- result: large`)
    is therefore run as a relation, whose query writes Arrow itself; binding it twice costs less
    than that copy. One such statement runs at a time in the process, so that two batches' largest
    statements do not add up (docs/decisions/003-large-statements.md), but for a file that says
    `-- result: large, concurrent`, which runs at any time; a file that says `-- hold: until release`
    starts a `hold`.
    """
    if held(name):
        hold()
    try:
        if not large(name):
            result = pl.from_arrow(con.execute(load(name), params or {}).to_arrow_table())
        else:
            with nullcontext() if concurrent(name) else _ONE_LARGE:
                result = pl.from_arrow(con.sql(load(name), params=params).to_arrow_table())
    except duckdb.Error as exc:
        raise SqlError(f"{shown(name)} failed: {exc}") from exc
    order = sorted_by(name)
    return result.sort(order, nulls_last=True) if order else result


def materialize(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> None:
    """Run sql/<stage>/<name>.sql into a temporary table of the same name (a `hold` as in `frame`)."""
    if held(name):
        hold()
    try:
        con.execute(f'create or replace temp table "{name}" as\n' + _statement(name), params or {})
    except duckdb.Error as exc:
        raise SqlError(f"{shown(name)} failed: {exc}") from exc


def view(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Define sql/<stage>/<name>.sql as a temporary view of the same name."""
    try:
        con.execute(f'create or replace temp view "{name}" as\n' + _statement(name))
    except duckdb.Error as exc:
        raise SqlError(f"{shown(name)} failed: {exc}") from exc


def flush(con: duckdb.DuckDBPyConnection) -> None:
    """Make DuckDB return to the system the memory its allocator keeps for reuse after a statement
    (setting the memory limit flushes it: it is set to what it is)."""
    limit = con.sql("select current_setting('memory_limit')").fetchall()[0][0]
    con.execute(f"set memory_limit = '{limit}'")


def within_limit(con: duckdb.DuckDBPyConnection, run: Callable[[], object]) -> object:
    """Run `run()` on `con` within its memory limit, and once more without it (DuckDB's default, a
    share of the machine's memory) when it does not fit: a limit bounds what a statement holds while
    it fits, never fails a run that the machine can finish."""
    try:
        return run()
    except Exception as exc:
        if not out_of_memory(exc):
            raise
    con.execute("reset memory_limit")
    return run()


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from, is a memory allocation that failed (DuckDB's
    memory limit, Arrow's or Python's allocator)."""
    while exc is not None:
        if isinstance(exc, (duckdb.OutOfMemoryException, pa.ArrowMemoryError, MemoryError)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
