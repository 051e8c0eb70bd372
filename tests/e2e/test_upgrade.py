"""An output outlives asr-batch's own upgrades: an output is a source (batch/sources/archive.py), an
output written by an earlier version is carried forward, never refused (docs/asr-tables.md, "An
output is a source").

tests/fixtures/outputs/<commit>/ are real outputs written by earlier commits of this repository
(tests/fixtures/outputs/README.md says how): the demo archive converted, one session group deleted,
converted again, so that each keeps a session whose source is gone. A fixture is added for each
release, so that the promise is tested for every earlier output."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import batch
import batch.output.folder
from batch.cli import _summary
from batch.errors import OutputError
from conftest import (
    assert_tables_equal, fault_env,
    FIXTURES, ROOT, SAMPLE, SID, assistant, dumps, read_manifest, small_sample, uid, user,
)

# the outputs of the demo archive, each named by the commit that wrote it (entire-<commit>: test_as_written.py)
OUTPUTS = sorted(p for p in (FIXTURES / "outputs").iterdir() if re.fullmatch(r"[0-9a-f]{7}", p.name))
GONE = "-Users-chip-dev-ai-music"  # the project the fixtures' second run no longer found
GONE_SID = "fed8ce56-bc79-401f-a83e-af084253362f"


def tree(folder: Path) -> dict[str, str]:
    """Every file below `folder` by its path, with its SHA-256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """The demo archive as the fixtures' second run found it: without the project GONE."""
    dest = tmp_path / "now" / "sample"  # named as the fixtures' input folder: tables name files by it
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(GONE))
    return dest


@pytest.fixture
def everything(tmp_path: Path) -> Path:
    """This version's conversion of every file the fixtures were given."""
    src = tmp_path / "all" / "sample"
    shutil.copytree(SAMPLE, src)
    out = tmp_path / "all-out"
    batch.convert([src], out)
    return out


def previous_output(fixture: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(fixture, out)
    return out


@pytest.mark.parametrize("fixture", OUTPUTS, ids=[p.name for p in OUTPUTS])
def test_an_output_of_an_earlier_version_is_carried_forward(fixture, sample, everything, tmp_path):
    out = previous_output(fixture, tmp_path)
    before = json.loads((fixture / "_reuse.json").read_text())["reads"][GONE_SID][0]
    result = batch.convert([sample], out)
    assert_tables_equal(out, everything)  # what this version writes for every file the output was given
    sessions = pl.read_parquet(out / "sessions" / "*.parquet")
    gone = sessions.filter(pl.col("session_key") == GONE_SID)
    assert gone.get_column("source_present").to_list() == [False]
    assert gone.get_column("source_last_read_at").dt.to_string("%Y-%m-%dT%H:%M:%S%.6fZ").to_list() == [before]
    assert sessions.filter(pl.col("session_key") != GONE_SID).get_column("source_present").all()
    written = json.loads((fixture / "manifest.json").read_text())
    version = written["producer"]["version"]
    assert [k["session_key"] for k in result.manifest["kept"]] == [GONE_SID]
    if version == batch.version.VERSION:  # this release's own output: its state read, nothing carried
        assert "carried" not in result.manifest and result.manifest["reuse"]["previous_output"]
        return
    carried = result.manifest["carried"]
    assert carried["from"] == [{
        "output": "(the previous output)",
        "written_by": {"version": version, "archive_format": written.get("archive", {}).get("format", 0)},
        "session_groups": [GONE_SID],
        "repositories": [],
    }]
    assert carried["inexact"] == [] and carried["not_carried"] == []  # every byte rebuilt as it was read
    assert result.manifest["archive"] == {"format": batch.version.ARCHIVE_FORMAT}
    assert f"carried 1 kept sessions forward from an output of asr-batch {version}" in _summary(result)
    # the second run after an upgrade converts nothing, and keeps the session
    again = batch.convert([sample], out)
    assert again.manifest["reuse"]["session_groups_converted"] == 0
    assert again.manifest["reuse"]["final_stage"] == "reused"
    assert [k["session_key"] for k in again.manifest["kept"]] == [GONE_SID]
    assert "carried" not in again.manifest and "carried" not in _summary(again)
    assert_tables_equal(out, everything)


def test_an_output_is_a_source_rebuilt_into_a_new_folder(everything, tmp_path):
    new = tmp_path / "new"
    result = batch.convert([everything], new)
    assert_tables_equal(new, everything)
    assert result.manifest["carried"]["inexact"] == []
    assert not pl.read_parquet(new / "sessions" / "*.parquet").get_column("source_present").any()
    again = batch.convert([everything], new)  # unchanged archive: nothing converted again
    assert again.manifest["reuse"]["session_groups_converted"] == 0


def test_two_archives_converted_into_one_equal_a_conversion_of_both_inputs(tmp_path):
    laptop = small_sample(tmp_path / "laptop-projects")
    desktop = tmp_path / "desktop-projects"
    desktop.mkdir()
    for project in ("-Users-demo-viewer", "-home-user-hooks"):
        shutil.move(laptop / project, desktop / project)
    batch.convert([laptop], tmp_path / "laptop-archive")
    batch.convert([desktop], tmp_path / "desktop-archive")
    team, once = tmp_path / "team", tmp_path / "once"
    result = batch.convert([tmp_path / "laptop-archive", tmp_path / "desktop-archive"], team)
    batch.convert([laptop, desktop], once)
    assert_tables_equal(team, once)
    # each archive's session groups, as its own reuse state names them
    assert [s["session_groups"] for s in result.manifest["carried"]["from"]] == [
        sorted(json.loads((tmp_path / name / "_reuse.json").read_text())["reads"])
        for name in ("laptop-archive", "desktop-archive")
    ]


def test_an_output_of_a_newer_version_is_refused_and_left_untouched(sample, tmp_path):
    out = previous_output(OUTPUTS[-1], tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["producer"]["version"] = "9.0.0"
    manifest["archive"] = {"format": batch.version.ARCHIVE_FORMAT + 1}
    (out / "manifest.json").write_text(json.dumps(manifest))
    before = tree(out)
    for prune in (False, True):
        with pytest.raises(OutputError, match=rf"asr-batch 9\.0\.0 .*newer than this asr-batch {re.escape(batch.version.VERSION)}"):
            batch.convert([sample], out, prune=prune)
    assert tree(out) == before


def test_pruning_an_output_of_an_earlier_version_drops_its_kept_sessions(sample, tmp_path):
    out = previous_output(OUTPUTS[0], tmp_path)
    result = batch.convert([sample], out, prune=True)
    assert "carried" not in result.manifest
    keys = pl.read_parquet(out / "sessions" / "*.parquet").get_column("session_key").to_list()
    assert GONE_SID not in keys and keys


@pytest.mark.parametrize("step", ["batch", "batches", "swap", "swapped"])
def test_a_kill_during_an_upgrade_leaves_the_old_output_or_the_new_one(step, sample, everything, tmp_path):
    out = previous_output(OUTPUTS[0], tmp_path)
    old = tree(out)
    env = fault_env(step)
    proc = subprocess.run(
        [sys.executable, "-m", "batch", "convert", str(sample), "--out", str(out), "-q"], env=env, cwd=ROOT,
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    if step == "swapped":  # the exchange happened: the new output
        assert read_manifest(out)["producer"]["version"] == batch.version.VERSION
    else:  # the old output as it was, readable by the version that wrote it
        assert tree(out) == old
    batch.convert([sample], out)  # the next run finishes the upgrade
    assert_tables_equal(out, everything)
    assert GONE_SID in pl.read_parquet(out / "sessions" / "*.parquet").get_column("session_key").to_list()


def test_hostile_lines_are_rebuilt_from_an_output_and_convert_the_same(tmp_path):
    """Every kind of line an output holds in its own place (docs/asr-tables.md, "An output is a
    source"): a byte order mark, blank lines with whitespace, objects back to back on one line, a line
    that is not JSON, one that is not UTF-8, a long string, a duplicate, bytes after the last newline."""
    project = tmp_path / "hostile" / "-home-user-proj"
    project.mkdir(parents=True)
    first, second = dumps(user(uid(1), None, "hello")), dumps(assistant(uid(2), uid(1), "msg_1", [
        {"type": "text", "text": "x" * (2 << 20)},  # a string of 2 MiB: elided and put back
    ]))
    lines = [
        b"\xef\xbb\xbf" + first.encode(),
        b"   \t",
        first.encode(),  # a duplicate of line 1
        b"",
        (second + dumps(user(uid(3), uid(2), "again"))).encode(),  # two objects on one line
        b"{not json",
        dumps(user(uid(4), uid(3), "caf\xe9")).encode("latin-1"),  # not UTF-8
        b"",
    ]
    (project / f"{SID}.jsonl").write_bytes(b"\n".join(lines) + b'{"type": "user", "unfinished')
    (project / "plain.jsonl").write_bytes(b"\n".join(lines[:3]))  # no final newline
    out, rebuilt = tmp_path / "out", tmp_path / "rebuilt"
    batch.convert([project.parent], out)
    result = batch.convert([out], rebuilt)
    assert_tables_equal(rebuilt, out)
    # only the whitespace of the blank line is not held: the files holding it are rebuilt with spaces
    assert result.manifest["carried"]["inexact"] == [f"hostile/-home-user-proj/{n}" for n in (f"{SID}.jsonl", "plain.jsonl")]
    statuses = set(pl.read_parquet(out / "source_lines" / "*.parquet").get_column("status").to_list())
    assert {"mapped", "duplicate", "recovered", "rejected", "uncommitted"} <= statuses
