"""The batch stage in DuckDB (batch/stage/, behind ASR_BATCH_STAGE=duckdb) writes what the present
batch stage writes: every table row for row, the manifest and the reuse state's record of each batch."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import batch
from batch import stage
from batch.output.layout import MANIFEST, STATE
from batch.schema import TABLES
from conftest import CORPUS, read_tables, sorted_rows, timeless
from entire_repos import build_scenario


@pytest.fixture
def in_duckdb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stage.SWITCH, "duckdb")
    assert stage.enabled()


def assert_same(got: Path, want: Path, *, same_batches: bool = True) -> None:
    """Every table of `got` holds `want`'s rows and the manifests list the same inputs and row
    counts; converted in the same batches, each batch's records are in the same order and each batch
    of the reuse state recorded the same groups, inputs, counts and rows per group."""
    mine, wanted = read_tables(got), read_tables(want)
    for t in TABLES:
        assert_frame_equal(sorted_rows(timeless(mine[t.name])), sorted_rows(timeless(wanted[t.name])), check_row_order=True)
    manifests = [json.loads((out / MANIFEST).read_text()) for out in (got, want)]
    assert manifests[0]["tables"] == manifests[1]["tables"] and manifests[0]["inputs"] == manifests[1]["inputs"]
    if not same_batches:
        return
    for part in (want / "records").glob("*.parquet"):  # a batch's records are in (session, seq) order
        assert_frame_equal(pl.read_parquet(got / "records" / part.name), pl.read_parquet(part))
    states = [json.loads((out / STATE).read_text())["batches"] for out in (got, want)]
    assert [{k: b[k] for k in ("part", "groups", "inputs", "counts", "rows")} for b in states[0]] == [
        {k: b[k] for k in ("part", "groups", "inputs", "counts", "rows")} for b in states[1]
    ]


def test_the_corpus_as_the_present_stage_writes_it(corpus_out: Path, tmp_path: Path, in_duckdb: None):
    out = tmp_path / "out"
    batch.convert([CORPUS], out)
    assert_same(out, corpus_out)


def test_a_batch_beyond_its_memory_limit_spills_and_writes_the_same_rows(corpus_out: Path, tmp_path: Path, in_duckdb: None):
    # 128 MiB for one batch of the whole corpus (whose tables hold more than twice that): they spill
    # to the run folder, which is gone once the run is over
    out = tmp_path / "out"
    batch.convert([CORPUS], out, memory_bytes=128 << 20, batch_bytes=256 << 20, workers=1)
    assert_same(out, corpus_out, same_batches=False)
    assert not list(tmp_path.glob(".*asr-run*"))


def test_entire_checkpoints_as_the_present_stage_writes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Claude Code transcripts read from Git blobs, beside Codex and Gemini sessions and lifecycle data
    scenario = build_scenario(tmp_path / "entire")
    want = tmp_path / "want"
    batch.convert([scenario["work"]], want)
    monkeypatch.setenv(stage.SWITCH, "duckdb")
    got = tmp_path / "got"
    batch.convert([scenario["work"]], got)
    assert_same(got, want)
