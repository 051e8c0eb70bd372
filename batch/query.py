"""Run SQL over an output folder and render the rows: the library behind `asr-batch sql`.

Queries run on `catalog.open_catalog`, a read-only connection that reads nothing outside the
folder. Before anything runs, every statement is checked: only statements that read (select,
explain, pragma, call, set, and temporary objects of the connection) are accepted, so that a
query cannot write a file into the output folder (COPY, EXPORT) or reach another database.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import duckdb

from batch.errors import BatchError

FORMATS = ("table", "csv", "json", "markdown")
TABLE_LIMIT = 40
_ROWS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL"})
_READING = _ROWS | {"SET", "CREATE", "DROP"}
_BATCH_ROWS = 2048


@dataclass
class Result:
    """Rows of the last statement that returns rows: its number (1-based) among `count` statements."""

    columns: list[str]
    rows: Iterator[tuple]
    index: int
    count: int
    text: str


def split(query: str) -> list[tuple[str, str]]:
    """Split `query` into (statement type, text) pairs; raise on an empty query or a writing statement."""
    try:
        parsed = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise BatchError(f"query failed: {_first_line(exc)}") from exc
    statements = [(s.type.name, s.query.strip().rstrip(";").strip()) for s in parsed]
    if not statements:
        raise BatchError('the query is empty. Pass SQL, e.g. asr-batch sql OUT "select count(*) from records".')
    for number, (kind, text) in enumerate(statements, 1):
        if kind not in _READING:
            where = f"statement {number} of {len(statements)}" if len(statements) > 1 else "the query"
            raise BatchError(
                f"{where} is {kind} ({_excerpt(text)}): asr-batch sql only reads the output. "
                'To export rows, use --format csv or json and redirect: asr-batch sql OUT "select ..." --format csv > rows.csv'
            )
    return statements


def run(con: duckdb.DuckDBPyConnection, query: str) -> Result | None:
    """Run every statement of `query` in order; return the rows of the last one that returns rows."""
    statements = split(query)
    last = max((i for i, (kind, _) in enumerate(statements) if kind in _ROWS), default=None)
    rows: Iterator[tuple] | None = None
    columns: list[str] = []
    for i, (_, text) in enumerate(statements):
        try:
            con.execute(text)
            if i == last:
                columns = [d[0] for d in con.description or ()]
                # A later statement would replace this result: keep its rows first (rare).
                rows = iter(con.fetchall()) if i < len(statements) - 1 else _fetch(con)
        except duckdb.Error as exc:
            where = f"statement {i + 1} of {len(statements)} ({_excerpt(text)}) failed" if len(statements) > 1 else "query failed"
            hint = ""
            if isinstance(exc, duckdb.IOException) and "No files found" in str(exc):
                hint = " A table folder of the output is missing: convert again into this folder."
            raise BatchError(f"{where}: {_first_line(exc)}{hint}") from exc
    if rows is None:
        return None
    return Result(columns, rows, last + 1, len(statements), statements[last][1])


def _fetch(cursor) -> Iterator[tuple]:
    try:
        while batch := cursor.fetchmany(_BATCH_ROWS):
            yield from batch
    except duckdb.Error as exc:
        raise BatchError(f"query failed while reading its rows: {_first_line(exc)}") from exc


def note(result: Result) -> str | None:
    """Say which statement's rows are shown when the query held several."""
    if result.count == 1:
        return None
    return f"Note: {result.count} statements ran; the rows shown are those of statement {result.index}: {_excerpt(result.text)}"


def render(result: Result, fmt: str, *, limit: int | None, write: Callable[[str], None]) -> None:
    """Write the rows of `result` as table, csv, json or markdown, `limit` rows at most."""
    rows = result.rows
    if fmt == "table":
        _table(result.columns, rows, limit or TABLE_LIMIT, write)
        return
    if limit is not None:
        rows = (row for _, row in zip(range(limit), rows))
    if fmt == "csv":
        _csv(result.columns, rows, write)
    elif fmt == "json":
        _json(result.columns, rows, write)
    elif fmt == "markdown":
        _markdown(result.columns, rows, write)
    else:
        raise BatchError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return format(value, ".10g")  # 0.04193025, not 0.041930249999999995
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=_json_value, ensure_ascii=False)
    return str(value)


def _table(columns: list[str], rows: Iterator[tuple], limit: int, write: Callable[[str], None]) -> None:
    shown = [[_text(v) for v in row] for _, row in zip(range(limit), rows)]
    more = next(rows, None) is not None
    widths = [min(60, max([len(c)] + [len(r[i]) for r in shown])) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.replace("\n", " ")[:60].ljust(w) for v, w in zip(values, widths)).rstrip()

    write(line(columns))
    write(line(["-" * w for w in widths]))
    for row in shown:
        write(line(row))
    if more:
        write(f"(first {limit} rows shown: raise --limit, or use --format csv for every row)")


def _csv(columns: list[str], rows: Iterator[tuple], write: Callable[[str], None]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([repr(v) if isinstance(v, float) else _text(v) for v in row])
        if buffer.tell() > 1 << 16:
            write(buffer.getvalue().removesuffix("\n"))
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        write(buffer.getvalue().removesuffix("\n"))


def _json_value(value: object) -> object:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _json(columns: list[str], rows: Iterator[tuple], write: Callable[[str], None]) -> None:
    """A JSON array with one object per row; dates as ISO 8601, bytes as base64."""
    write("[")
    previous = None
    for row in rows:
        if previous is not None:
            write(previous + ",")
        previous = json.dumps(dict(zip(columns, row)), default=_json_value, ensure_ascii=False)
    if previous is not None:
        write(previous)
    write("]")


def _markdown(columns: list[str], rows: Iterator[tuple], write: Callable[[str], None]) -> None:
    def cell(value: object) -> str:
        return _text(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    write("| " + " | ".join(cell(c) for c in columns) + " |")
    write("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        write("| " + " | ".join(cell(v) for v in row) + " |")


def shell(con: duckdb.DuckDBPyConnection, *, read: Callable[[str], str], write: Callable[[str], None],
          error: Callable[[str], None]) -> None:
    """An interactive prompt: statements end with `;`; `.tables` lists the relations, `.quit` leaves."""
    write('Every table and view of the output is available by name. End statements with ";".')
    write("Type .tables to list them, .quit (or Ctrl-D) to leave.")
    pending: list[str] = []
    while True:
        try:
            line = read("asr> " if not pending else "...> ")
        except EOFError:
            write("")
            return
        except KeyboardInterrupt:
            write("")
            pending = []
            continue
        stripped = line.strip()
        if not pending and stripped in (".quit", ".exit"):
            return
        if not pending and stripped == ".tables":
            names = con.sql("select table_name from duckdb_tables() where not internal union "
                            "select view_name from duckdb_views() where not internal order by 1").fetchall()
            write("  ".join(n for (n,) in names))
            continue
        pending.append(line)
        if not stripped.endswith(";"):
            continue
        text, pending = "\n".join(pending), []
        try:
            result = run(con, text)
        except BatchError as exc:
            error("Error: " + " ".join(str(exc).split()))
            continue
        if result is not None:
            if (message := note(result)) is not None:
                error(message)
            render(result, "table", limit=None, write=write)


def _excerpt(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).strip().splitlines()[0].split()) if str(exc).strip() else type(exc).__name__
