"""Every notebook of notebooks/ runs headless against the demo output, and draws its charts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import batch

ROOT = Path(__file__).resolve().parent.parent
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
