"""bench/statements.py: it sums DuckDB's profile of each statement, measures what each table holds by
dropping it, and runs on an archive; nothing here is timed."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import statements  # noqa: E402


def test_each_statement_profile_is_summed_by_its_first_line(tmp_path):
    raw = duckdb.connect()
    raw.execute("set enable_profiling = 'json'")
    raw.execute("set profiling_mode = 'detailed'")
    raw.execute("set profiling_output = $path", {"path": str(tmp_path / "p.json")})
    con = statements.Profiled(raw, str(tmp_path / "p.json"))
    con.execute("create temp table t as\nselect range as n from range(1000)")
    con.execute("create or replace temp table t as\nselect range as n from range(10)")
    con.execute("create temp table u as select n from t where n > 5")
    assert set(con.total) == {"create temp table t as", "create or replace temp table t as",
                              "create temp table u as select n from t where n > 5"}
    assert all(0 < con.planning[name] <= con.total[name] for name in con.total)
    assert "CREATE_TABLE_AS" in con.operators
    assert not (tmp_path / "p.json").exists()  # each profile read once


def test_what_each_table_holds_is_what_dropping_it_frees():
    con = duckdb.connect()
    con.execute("create temp table large as select range::bigint as n from range(2000000)")  # about 15 MiB
    con.execute("create temp table small as select range::bigint as n from range(1000)")
    freed = dict((name, mib) for mib, name in statements.held_by_table(con))
    assert freed["large"] > 10 and freed["small"] < 1 and freed["all"] >= freed["large"]
    assert con.sql("select count(*) from duckdb_tables() where temporary").fetchall() == [(0,)]


def test_it_profiles_one_batch_of_an_archive():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "statements.py"), str(ROOT / "data" / "sample"),
         "--size-mb", "1", "--top", "1000"],
        capture_output=True, text=True, env=env, check=True,
    )
    lines = run.stdout.splitlines()
    assert "one batch of" in lines[0]
    assert lines[1].startswith("CPU s of the batch")
    listed = lines[3:lines.index(next(line for line in lines if line.startswith("the operators")))]
    assert any("observations" in line for line in listed) and any('"parts"' in line for line in listed)
    assert lines[-2].startswith("DuckDB holds") and "all " in lines[-1]  # then what each table holds
