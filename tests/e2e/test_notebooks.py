"""Every notebook of notebooks/ runs headless against the demo output, draws its charts, and shows
the figures the output's tables hold."""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import batch
from conftest import ROOT

NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*.py") if p.stem != "common")
CHARTS = {
    "usage_and_cost": {"tokens_by_day_and_model.png", "cost_by_project.png"},
    "tools_agents_approvals": {"tool_error_rates.png", "subagent_share.png"},
}


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output `make demo` writes: data/sample converted."""
    out = tmp_path_factory.mktemp("demo") / "out"
    batch.convert([ROOT / "data" / "sample"], out)
    return out


def test_every_notebook_is_listed():
    assert {p.stem for p in NOTEBOOKS} == set(CHARTS)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_headless(notebook: Path, demo_out: Path, tmp_path: Path):
    charts = tmp_path / "charts"
    env = {**os.environ, "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(tmp_path / "mpl")}
    done = subprocess.run(
        [sys.executable, str(notebook), "--", "--out", str(demo_out), "--charts", str(charts)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    written = {p.name for p in charts.iterdir()}
    assert written == CHARTS[notebook.stem]
    for name in written:
        assert (charts / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# A headless `python notebook.py` prints nothing: what a notebook shows is its cells' outputs, which
# `app.run()` (the call its `__main__` makes) returns. This runs the notebook file the same way, with
# its folder first on sys.path and the same arguments, and prints the text of every markdown output.
SHOW = """
import importlib.util, json, sys
from pathlib import Path
notebook = sys.argv[1]
sys.argv = [notebook, "--", *sys.argv[2:]]
sys.path.insert(0, str(Path(notebook).parent))
spec = importlib.util.spec_from_file_location("notebook", notebook)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
outputs, _ = module.app.run()
print(json.dumps([o.text for o in outputs if isinstance(getattr(o, "text", None), str)]))
"""


def shown(notebook: str, out: Path, tmp_path: Path) -> str:
    """The text of the notebook's markdown outputs over `out`, tags removed, one string."""
    env = {**os.environ, "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(tmp_path / "mpl")}
    done = subprocess.run(
        [sys.executable, "-c", SHOW, str(ROOT / "notebooks" / f"{notebook}.py"), "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    texts = json.loads(done.stdout.splitlines()[-1])
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", t)) for t in texts)


def figure(shown: str) -> int:
    return int(shown.replace(",", ""))


def parquet(con: duckdb.DuckDBPyConnection, out: Path, query: str) -> tuple:
    """The one row of `query`, where `{table}` reads OUT/<table>/*.parquet: the files, not the catalog."""
    return con.sql(re.sub(r"\{(\w+)\}", lambda m: f"read_parquet('{out / m[1]}/*.parquet')", query)).fetchall()[0]


def test_usage_and_cost_shows_the_totals_of_the_inferences(demo_out: Path, tmp_path: Path):
    text = shown("usage_and_cost", demo_out, tmp_path)
    found = re.search(
        r"([\d,]+) model responses from (\S+) to (\S+),\s+([\d,]+) tokens .*?\s([\d,]+) responses \((\d+%)\) have no "
        r"final usage line", text, re.DOTALL,
    )
    assert found, text
    with duckdb.connect() as con:
        responses, tokens, incomplete = parquet(con, demo_out, """
            select count(*), sum(input_total_tokens + output_total_tokens), count(*) filter (where not usage_complete)
            from {inferences}
        """)
        first, last = parquet(con, demo_out, """
            select min(r.timestamp), max(r.timestamp) from {inferences} as i join {records} as r using (record_id)
        """)
    # the day of a response is its UTC day
    days = [str(t.astimezone(dt.UTC).date()) for t in (first, last)]
    assert responses > 0 and incomplete > 0  # else the figures below would say little
    assert [figure(found[1]), figure(found[4]), figure(found[5])] == [responses, tokens, incomplete]
    assert [found[2], found[3]] == days
    assert found[6] == f"{incomplete / responses:.0%}"


def test_tools_agents_approvals_shows_the_counts_of_the_tables(demo_out: Path, tmp_path: Path):
    text = shown("tools_agents_approvals", demo_out, tmp_path)
    found = re.search(r"([\d,]+) tool calls \(([\d,]+) without a result in the capture\)\s+over ([\d,]+) streams, "
                      r"of which ([\d,]+) are subagents", text)
    share = re.search(r"subagents and sidechains spent (\d+%) of the tokens", text)
    assert found and share, text
    with duckdb.connect() as con:
        calls, pending = parquet(con, demo_out, "select count(*), count(*) filter (where status = 'pending') from {tool_calls}")
        streams, subagents = parquet(con, demo_out, "select count(*), count(*) filter (where stream_kind <> 'main') from {sessions}")
        # a stream that is not known as a main session counts as a subagent's
        (token_share,) = parquet(con, demo_out, """
            select sum(i.input_total_tokens + i.output_total_tokens) filter (where s.stream_kind is distinct from 'main')
                   / sum(i.input_total_tokens + i.output_total_tokens)
            from {inferences} as i left join {sessions} as s using (session_key)
        """)
    assert calls > 0 and 0 < subagents < streams  # else the figures below would say little
    assert [figure(g) for g in found.groups()] == [calls, pending, streams, subagents]
    assert share[1] == f"{token_share:.0%}"
