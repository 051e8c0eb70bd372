"""Where one batch's CPU seconds go inside DuckDB, statement by statement, and what DuckDB holds.

    python bench/statements.py ARCHIVE [--size-mb 48] [--threads 1] [--top 25]

Converts one batch of the archive's first session groups (in discovery order, whole groups, about
SIZE MiB) with the Claude Code converter on a DuckDB connection of its own (THREADS threads), its
tables read as Arrow instead of written, with DuckDB's profiler on, and prints:
- the batch's CPU seconds, and the part of them DuckDB's statements took;
- each statement's time and, of it, its planning (binding, optimizing and physical planning),
  summed over the calls of one SQL statement (named by its first line);
- the time of the operators of every statement, by operator type;
- what DuckDB holds when the statements after the fold start (formats/claude_code/converter.py
  `_statements`), by table: the memory that dropping each table gives back.

The profiler adds a little to every statement; the figures are for comparing, not for the total
(bench/batches.py and bench/run.py --profile give those). docs/performance.md, "Where the time and
memory go", and docs/decisions/021-batch-stage-in-duckdb.md quote them.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb

from batch import sql
from batch.formats.claude_code import converter
from batch.sources import registry
from batch.sources.base import Loaded


class Profiled:
    """A DuckDB connection whose executed statements' profiles are summed (DuckDB writes each one's
    JSON profile to `path` as the statement ends)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str) -> None:
        self._con, self._path = con, path
        self.total, self.planning, self.operators = Counter(), Counter(), Counter()

    def __getattr__(self, name: str):
        return getattr(self._con, name)

    def execute(self, query, *args, **kwargs):
        result = self._con.execute(query, *args, **kwargs)
        try:
            with open(self._path) as fh:
                profile = json.load(fh)
            os.remove(self._path)
        except FileNotFoundError:
            return result
        name = query.split("\n")[0][:72] if isinstance(query, str) else str(query)
        self.total[name] += profile["query"]["total_time"]
        steps = ("planner", "optimizer", "physical_planner")
        self.planning[name] += sum(profile.get(k, {}).get("total_time", 0) for k in steps)
        for node in profile.get("operator", []):
            self._operators(node)
        return result

    def _operators(self, node: dict) -> None:
        seconds = node.get("operator_timing", node.get("timing", 0)) or 0
        self.operators[node.get("operator_type", node.get("type"))] += seconds
        for child in node.get("children", []):
            self._operators(child)


def held_by_table(con: duckdb.DuckDBPyConnection) -> list[tuple[float, str]]:
    """What dropping each temporary table gives back, in MiB (the tables are dropped)."""
    def held() -> float:
        return con.sql("select sum(memory_usage_bytes) from duckdb_memory()").fetchall()[0][0] / 2**20

    freed = [(held(), "all")]
    for (name,) in con.sql("select table_name from duckdb_tables() where temporary order by table_name").fetchall():
        before = held()
        con.execute(f'drop table "{name}"')
        freed.append((before - held(), name))
    return freed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--size-mb", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    found = registry.discover([args.archive], [], combine=False)
    loaded, size = Loaded(), 0
    for unit in found.units:
        if size >= args.size_mb << 20:
            break
        loaded.extend(unit.load())
        size += unit.size
    files = [s for s in loaded.streams if s.producer_source == converter.FORMAT]
    folder = tempfile.mkdtemp()
    tool_results = found.tool_results
    # first what DuckDB holds as the statements after the fold start (the probe drops the tables)
    held: list[tuple[float, str]] = []
    statements = converter._statements

    def probe(con, tables, write):
        held.extend(held_by_table(con))
        raise _Held

    converter._statements = probe
    try:
        converter.convert(_connect(folder, args.threads), files, tool_results=tool_results, write=lambda *a: None)
    except _Held:
        pass
    converter._statements = statements
    # then the whole batch, profiled
    raw = _connect(folder, args.threads)
    raw.execute("set enable_profiling = 'json'")
    raw.execute("set profiling_mode = 'detailed'")
    raw.execute("set profiling_output = $path", {"path": os.path.join(folder, "profile.json")})
    con = Profiled(raw, os.path.join(folder, "profile.json"))
    started = time.process_time()
    converter.convert(con, files, tool_results=tool_results,
                      write=lambda table, relation, restore: raw.sql(f'select * from "{relation}"').arrow())
    cpu = time.process_time() - started
    total, planning = sum(con.total.values()), sum(con.planning.values())
    print(f"{args.archive}: one batch of {size / 2**20:.1f} MiB ({len(files)} streams), "
          f"DuckDB on {args.threads} thread(s)")
    print(f"CPU s of the batch (this thread) {cpu:.3f}; DuckDB's statements {total:.3f} s, "
          f"of which planning {planning:.3f} s")
    print(f"{'s':>8} {'planning':>9}  statement (first line)")
    for name, seconds in con.total.most_common(args.top):
        print(f"{seconds:8.3f} {con.planning[name]:9.3f}  {name}")
    print("the operators, by type (s): " + ", ".join(f"{k} {v:.3f}" for k, v in con.operators.most_common(10)))
    print("DuckDB holds when the statements after the fold start (MiB, what dropping each table frees):")
    print("  " + ", ".join(f"{name} {mib:.1f}" for mib, name in sorted(held, reverse=True) if mib >= 0.5))


def _connect(folder: str, threads: int) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"set threads = {threads}")
    con.execute("set temp_directory = $path", {"path": folder})
    sql.define_macros(con)
    return con


class _Held(Exception):
    """The probe of what DuckDB holds ends the first conversion."""


if __name__ == "__main__":
    main()
