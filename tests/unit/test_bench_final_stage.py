"""bench/finalize.py and bench/inferences_scaled.py run on the sample archive; nothing here is timed."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import duckdb
from conftest import ROOT

import batch

SAMPLE = ROOT / "data" / "sample"


def _bench(script: str, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bench")])}
    run = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                         capture_output=True, text=True, env=env, check=True)
    return run.stdout.splitlines()


def test_the_final_stage_is_measured_with_and_without_its_statements():
    alone = _bench("finalize.py", str(SAMPLE))
    assert len(alone) == 1 and "final stage" in alone[0] and "peak" in alone[0]
    steps = _bench("finalize.py", str(SAMPLE), "--steps")
    assert any(line.startswith("  build inference_observations:") for line in steps)
    assert any(line.startswith("  write inferences from inferences:") for line in steps)


def test_copies_of_the_observations_give_as_many_times_their_rows(tmp_path):
    lines = _bench("inferences_scaled.py", str(SAMPLE), "--copies", "1,3")
    rows = {}
    for line in lines:
        if line.endswith(":"):
            k = int(line.rsplit(" x ", 1)[1].rstrip(":"))
        else:
            label, count = re.match(r"  (\w+ \w+): .*\(([\d,]+) rows\)$", line).groups()
            rows[k, label] = int(count.replace(",", ""))
    # the sample's observations and responses, counted in its output, not by the bench
    out = tmp_path / "out"
    batch.convert([SAMPLE], out)
    con = duckdb.connect()
    observations = con.sql(f"select count(*) from '{out}/inference_observations/*.parquet'").fetchall()[0][0]
    inferences = con.sql(f"select count(*) from '{out}/inferences/*.parquet'").fetchall()[0][0]
    assert observations >= inferences > 0
    for k in (1, 3):
        assert rows[k, "build inference_observations"] == rows[k, "write inference_observations"] == k * observations
        assert rows[k, "build inferences"] == rows[k, "write inferences"] == k * inferences
