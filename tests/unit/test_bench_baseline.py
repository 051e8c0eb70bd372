"""The arithmetic and the lines of `bench/run.py --baseline` (bench/baseline.py), and compare.py's --exclude;
nothing here is timed."""

from __future__ import annotations

import sys

import duckdb
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import baseline  # noqa: E402
import compare  # noqa: E402


def run(seconds: float, cpu: float, kernel: float, peak: float) -> dict:
    return {"seconds": seconds, "cpu_seconds": cpu, "system_cpu_seconds": kernel, "peak_rss_mib": peak}


def test_the_baseline_runs_first_in_every_pair():
    assert baseline.order(2) == ["baseline", "new", "baseline", "new"]
    assert baseline.order(3) == ["baseline", "new", "baseline", "new", "baseline", "new"]
    assert baseline.order(0) == ["baseline", "new"]


def test_best_keeps_the_least_wall_and_cpu_and_the_highest_peak():
    best = baseline.best([run(10.0, 14.0, 3.0, 800), run(9.0, 15.0, 2.0, 820)])
    assert best == {
        "seconds": 9.0, "cpu_seconds": 14.0, "user_cpu_seconds": 11.0, "system_cpu_seconds": 3.0,
        "peak_rss_mib": 820, "all_seconds": [10.0, 9.0], "all_cpu_seconds": [14.0, 15.0],
        "all_other_cpu_seconds": [None, None],
    }


def test_the_ratios_and_the_target():
    base = baseline.best([run(10.0, 20.0, 5.0, 800)])
    assert baseline.ratios(base, baseline.best([run(5.0, 12.0, 2.0, 400)])) == {
        "wall": 0.5, "cpu": 0.6, "wall_met": True, "cpu_met": False, "peak": 0.5,
    }
    assert baseline.ratios(base, baseline.best([run(6.0, 10.0, 2.0, 400)])) == {
        "wall": 0.6, "cpu": 0.5, "wall_met": True, "cpu_met": True, "peak": 0.5,
    }
    lines = baseline.report("baseline a4eff9c", base, baseline.best([run(8.0, 16.0, 4.0, 880), run(7.5, 17.0, 4.0, 900)]))
    assert lines == [
        "          baseline a4eff9c: 10.00 s wall, 20.00 s CPU (15.00 user, 5.00 kernel), peak RSS 800 MiB (runs: 10.0 s)",
        "          checkout: 7.50 s wall, 16.00 s CPU (12.00 user, 4.00 kernel), peak RSS 900 MiB (runs: 8.0, 7.5 s)",
        "          checkout / baseline = 0.75 wall, 0.80 in CPU seconds, 1.12 in peak "
        "(target <= 0.6 in wall: NOT met; <= 0.5 in CPU: NOT met)",
    ]


def test_compare_leaves_an_excluded_column_out(tmp_path, capsys):
    for side, read_at in (("before", 1), ("after", 2)):
        (tmp_path / side).mkdir()
        duckdb.sql(f"copy (select 'a' as session_id, {read_at} as source_last_read_at) "
                   f"to '{tmp_path / side / 'part.parquet'}'")
    globs = [str(tmp_path / side / "*.parquet") for side in ("before", "after")]
    con = duckdb.connect()
    assert not compare.compare_table(con, "sessions", *globs, 0)
    assert compare.compare_table(con, "sessions", *globs, 0, frozenset({"sessions.source_last_read_at"}))
    assert "(excluded: source_last_read_at)" in capsys.readouterr().out.splitlines()[-1]
