"""Sessions an earlier output holds without the bytes they were converted from are carried forward as
that output wrote them (batch/incremental/as_written.py, docs/asr-tables.md "An output is a source").

tests/fixtures/outputs/entire-1b86101 is a real output of asr-batch 0.3.0 (which kept no copy of the
Git objects it read) of the Entire repository `entire_repos.build_scenario` builds, converted alone
(tests/fixtures/outputs/README.md says how). Its repository gone, none of its sessions can be
converted again: each keeps the rows 0.3.0 wrote, with this version's columns."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import batch
from batch.cli import _summary
from batch.schema import TABLES
from conftest import FIXTURES, SID, assert_tables_equal, read_tables, sorted_rows, timeless, uid, user, write_jsonl
from entire_repos import build_scenario

FIXTURE = FIXTURES / "outputs" / "entire-1b86101"
# the session groups the fixture holds: a main session's key names its group
GROUPS = {"019dc116-c183-74f3-8f98-b4e5bd8eddfa", "019f9261-846e-7fc0-b843-e0464227f290",
          "01a082cd-8bed-71c2-89f1-161a92f4ae0b", "22222222-2222-4222-8222-222222222222",
          "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444",
          "5a3bb1c8-c3ce-466e-b487-24212cbf1da1", "f0f0f0f0f0f0/0", "f7633853-6663-4dbb-bbf4-6159afa29df8"}


def as_written(table) -> pl.DataFrame:
    """The fixture's rows of `table` with this version's columns: those 0.3.0 did not write null, and
    `sessions.source_present` false (their source is gone). Read from its files, not by asr-batch."""
    files = sorted((FIXTURE / table.name).glob("*.parquet"))
    frame = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
    frame = frame.with_columns(pl.lit(None).alias(c) for c in table.schema.names if c not in frame.columns)
    if table.name == "sessions":
        frame = frame.with_columns(source_present=pl.lit(False))
    return pl.from_arrow(frame.to_arrow().select(table.schema.names).cast(table.schema))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A Claude Code folder that is still there: one session."""
    folder = tmp_path / "projects" / "-p"
    write_jsonl(folder / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    return folder.parent


def test_sessions_held_without_their_bytes_keep_the_rows_the_earlier_version_wrote(project, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(FIXTURE, out)
    result = batch.convert([project], out)
    alone = tmp_path / "alone"
    batch.convert([project], alone)
    got, fresh = read_tables(out), read_tables(alone)
    for table in TABLES:
        if table.stage == "held":
            continue
        want = pl.concat([fresh[table.name], as_written(table)])
        try:
            assert_frame_equal(sorted_rows(timeless(got[table.name])), sorted_rows(timeless(want)), check_row_order=True)
        except AssertionError as exc:
            raise AssertionError(f"table {table.name}: {exc}") from None
    entries = result.manifest["as_written"]
    assert {e["session_group"] for e in entries} == GROUPS
    assert {e["written_by"] for e in entries} == {"asr-batch 0.3.0 (archive format 1)"}
    assert result.manifest["carried"]["not_carried"] == []  # none of the fixture's sessions is dropped
    assert "9 sessions as asr-batch 0.3.0 (archive format 1) wrote them" in _summary(result)

    # the next run keeps them as they are, and runs no final stage
    again = batch.convert([project], out)
    assert again.manifest["reuse"]["session_groups_converted"] == 0
    assert again.manifest["reuse"]["final_stage"] == "reused"
    assert {e["session_group"] for e in again.manifest["as_written"]} == GROUPS
    for name, frame in read_tables(out).items():
        assert_frame_equal(sorted_rows(frame), sorted_rows(got[name]), check_row_order=True)
    # a change elsewhere runs the final stage: the rows as written are not read by it, nor lost
    write_jsonl(project / "-q" / f"{uid(7)}.jsonl", [user(uid(8), None, "another")])
    batch.convert([project], out)
    sessions = read_tables(out)["sessions"]
    assert sessions.filter(pl.col("session_key").is_in(list(GROUPS))).height == len(GROUPS)
    assert sessions.get_column("session_key").is_unique().all()


def test_the_repository_given_again_converts_its_sessions_in_place_of_the_rows_as_written(project, tmp_path):
    repo = build_scenario(tmp_path / "src")["work"]
    fixture_commits = set(pl.read_parquet(FIXTURE / "checkpoints" / "*.parquet")["commit_id"])
    assert fixture_commits <= set(read_tables_of_repo(repo, tmp_path)["checkpoints"]["commit_id"])
    out = tmp_path / "out"
    shutil.copytree(FIXTURE, out)
    batch.convert([project], out)
    result = batch.convert([repo, project], out)
    assert result.manifest["as_written"] == []
    full = tmp_path / "full"
    batch.convert([repo, project], full)
    assert_tables_equal(out, full)


def test_pruning_drops_the_sessions_as_written(project, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(FIXTURE, out)
    batch.convert([project], out)
    result = batch.convert([project], out, prune=True)
    assert result.manifest["as_written"] == []
    assert set(read_tables(out)["sessions"]["session_key"]) == {SID}


def test_an_output_of_sessions_as_written_is_a_source_too(project, tmp_path):
    """An output holding sessions as written, converted into a new folder, holds them the same."""
    out = tmp_path / "out"
    shutil.copytree(FIXTURE, out)
    batch.convert([project], out)
    copy = tmp_path / "copy"
    result = batch.convert([out], copy)
    assert {(e["session_group"], e["written_by"]) for e in result.manifest["as_written"]} == {
        (g, "asr-batch 0.3.0 (archive format 1)") for g in GROUPS}
    assert_tables_equal(copy, out)


def read_tables_of_repo(repo: Path, tmp_path: Path) -> dict[str, pl.DataFrame]:
    out = tmp_path / "repo-out"
    batch.convert([repo], out)
    return read_tables(out)
