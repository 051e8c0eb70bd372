"""An output can be checked and repaired: the manifest records every part file's size and SHA-256;
a run converts the groups whose parts are damaged again, from their files, or from the output's own
copy of them when their files are gone; only what no intact copy holds is a declared loss
(docs/asr-tables.md, "Checking and repairing an output")."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import batch
from batch.cli import _summary
from batch.errors import OutputError
from conftest import read_tables, small_sample
from conftest import assert_tables_equal

VIEWER_SID = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
VIEWER = f"-Users-demo-viewer/{VIEWER_SID}.jsonl"
OTHER_SID = "fed8ce56-bc79-401f-a83e-af084253362f"


@pytest.fixture
def kept(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(sample, out, reference): an output of the sample (one batch per group) keeping VIEWER_SID,
    whose file is gone, and a copy of that output as it was written."""
    sample = small_sample(tmp_path / "laptop-projects")
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    (sample / VIEWER).unlink()
    batch.convert([sample], out, batch_bytes=1)
    reference = tmp_path / "reference"
    shutil.copytree(out, reference)
    return sample, out, reference


def part_of(out: Path, owner: str, table: str) -> Path:
    holder = next(b for b in json.loads((out / "_reuse.json").read_text())["batches"] if owner in b["groups"])
    return out / table / f"part-{holder['part']}.parquet"


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_the_manifest_records_every_part_file(kept):
    _, out, _ = kept
    files = json.loads((out / "manifest.json").read_text())["files"]
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("part-*.parquet"))
    assert sorted(files) == on_disk
    for rel, (size, sha) in files.items():
        data = (out / rel).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha)


def test_a_truncated_part_of_a_present_session_is_converted_again_from_its_file(kept):
    sample, out, reference = kept
    truncate(part_of(out, OTHER_SID, "records"))
    result = batch.convert([sample], out, batch_bytes=1)
    assert result.manifest["damaged"]["files"] == [part_of(out, OTHER_SID, "records").relative_to(out).as_posix()]
    assert result.manifest["damaged"]["session_groups_converted"] == 1
    assert_tables_equal(out, reference)
    assert read_tables(out)["records"].height == read_tables(reference)["records"].height


def test_a_truncated_part_of_a_kept_session_is_rebuilt_from_the_outputs_copy(kept):
    sample, out, reference = kept
    truncate(part_of(out, VIEWER_SID, "tool_calls"))
    result = batch.convert([sample], out, batch_bytes=1)
    assert result.manifest["damaged"]["session_groups_rebuilt"] == [VIEWER_SID]
    assert_tables_equal(out, reference)
    sessions = pl.read_parquet(out / "sessions" / "*.parquet").filter(pl.col("session_key") == VIEWER_SID)
    assert sessions.get_column("source_present").to_list() == [False]
    again = batch.convert([sample], out, batch_bytes=1)  # repaired: nothing more to do
    assert "damaged" not in again.manifest and again.manifest["reuse"]["session_groups_converted"] == 0


def test_a_kept_session_without_an_intact_copy_is_refused_then_declared_lost_with_verify(kept):
    sample, out, reference = kept
    truncate(part_of(out, VIEWER_SID, "records"))  # records.native holds most of its lines
    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(OutputError, match="--verify"):
        batch.convert([sample], out, batch_bytes=1)
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing touched
    result = batch.convert([sample], out, batch_bytes=1, verify=True)
    assert result.manifest["damaged"]["session_groups_lost"] == [VIEWER_SID]
    losses = pl.read_parquet(out / "losses" / "*.parquet")
    assert losses.filter(pl.col("category") == "archive.part_damaged").get_column("session_key").to_list() == [VIEWER_SID]
    assert "lost 1 sessions" in _summary(result)
    keys = pl.read_parquet(out / "sessions" / "*.parquet").get_column("session_key").to_list()
    assert VIEWER_SID not in keys and OTHER_SID in keys
    for table in ("records", "parts", "tool_calls"):  # every table reads again
        pl.read_parquet(out / table / "*.parquet")


def test_a_part_changed_without_changing_its_size_is_found_by_verify(kept):
    sample, out, reference = kept
    path = part_of(out, OTHER_SID, "parts")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert "damaged" not in batch.convert([sample], out, batch_bytes=1).manifest  # size and time only
    result = batch.convert([sample], out, batch_bytes=1, verify=True)
    assert result.manifest["damaged"]["files"] == [path.relative_to(out).as_posix()]
    assert_tables_equal(out, reference)


def test_a_truncated_part_of_a_final_table_is_written_again(kept):
    sample, out, reference = kept
    truncate(next((out / "inferences").glob("part-*.parquet")))
    result = batch.convert([sample], out, batch_bytes=1)
    assert result.manifest["reuse"]["final_stage"] == "run"
    assert_tables_equal(out, reference)
