"""Rollouts Codex compressed (`rollout-*.jsonl.zst`, codex-format.md §14.2) are read as their plain form."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import batch
from conftest import FIXTURES, assert_same_as_full, read_manifest, read_tables, sorted_rows, timeless

ROLLOUTS = sorted((FIXTURES / "codex").glob("rollout-*.jsonl"))


def compress(plain: Path, *, keep: bool = False, frames: int = 1) -> Path:
    """Compress `plain` as Codex does (zstd frames without a content size; the modification time
    kept), into `plain`.zst; remove the plain file unless `keep`."""
    data = plain.read_bytes()
    cut = [len(data) * i // frames for i in range(frames + 1)]
    packed = b""
    for a, b in zip(cut, cut[1:]):
        sink = pa.BufferOutputStream()
        with pa.CompressedOutputStream(sink, "zstd") as out:
            out.write(data[a:b])
        packed += sink.getvalue().to_pybytes()
    target = plain.with_name(plain.name + ".zst")
    target.write_bytes(packed)
    st = plain.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    if not keep:
        plain.unlink()
    return target


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions" / "2026" / "02" / "23"
    folder.mkdir(parents=True)
    for path in ROLLOUTS:
        shutil.copy2(path, folder / path.name)
    return tmp_path / "sessions"


def lines_of(path: Path) -> int:
    return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())


def test_a_compressed_rollout_converts_as_its_plain_file(sessions, tmp_path):
    plain = batch.convert([sessions], tmp_path / "plain")
    for path in sorted(sessions.rglob("*.jsonl"))[::2]:
        compress(path, frames=2)  # read across frames, as the reference asks
    assert any(sessions.rglob("*.jsonl.zst"))
    batch.convert([sessions], tmp_path / "compressed")
    want, got = read_tables(tmp_path / "plain"), read_tables(tmp_path / "compressed")
    for name, frame in want.items():
        assert sorted_rows(timeless(got[name])).equals(sorted_rows(timeless(frame))), name
    # every line of every rollout, named as the plain file
    counts = got["source_lines"].group_by("source_file").len()
    assert dict(counts.iter_rows()) == {
        f"sessions/2026/02/23/{p.name}": lines_of(p) for p in ROLLOUTS
    }
    assert read_manifest(tmp_path / "compressed")["inputs"] == plain.manifest["inputs"].parse()


def test_compressed_between_runs_is_the_same_file_reused(sessions, tmp_path):
    out = tmp_path / "out"
    batch.convert([sessions], out)
    for path in sorted(sessions.rglob("*.jsonl")):
        compress(path)
    manifest = batch.convert([sessions], out).manifest
    assert manifest["reuse"]["session_groups_reused"] == len(ROLLOUTS)
    assert manifest["reuse"]["session_groups_converted"] == 0
    assert manifest["kept"] == [] and manifest.get("replaced", []) == []
    sessions_table = read_tables(out)["sessions"]
    assert sessions_table["source_present"].all()
    # and decompressed again (Codex resumes a session into its plain file): still the same file
    zst = sorted(sessions.rglob("*.jsonl.zst"))[0]
    plain = zst.with_suffix("")
    with pa.CompressedInputStream(pa.OSFile(str(zst)), "zstd") as f:
        plain.write_bytes(f.read())
    st = zst.stat()
    os.utime(plain, ns=(st.st_atime_ns, st.st_mtime_ns))
    zst.unlink()
    manifest = batch.convert([sessions], out, verify=True).manifest
    assert manifest["reuse"]["session_groups_reused"] == len(ROLLOUTS)
    assert_same_as_full(sessions, out, tmp_path)


def test_both_forms_present_read_the_plain_one(sessions, tmp_path):
    path = sorted(sessions.rglob("*.jsonl"))[0]
    compress(path, keep=True)
    manifest = batch.convert([sessions], tmp_path / "out").manifest
    shown = f"sessions/2026/02/23/{path.name}"
    assert {"path": shown + ".zst", "reason": f"compressed copy of {shown}, which is read instead"} in manifest["skipped"].parse()
    assert [i["path"] for i in manifest["inputs"].parse()].count(shown) == 1


def test_codex_temporary_files_are_skipped_with_a_reason(sessions, tmp_path):
    folder = next(sessions.rglob("*.jsonl")).parent
    names = ["rollout-compress-Ab12Cd.tmp", f"{ROLLOUTS[0].name}.decompress.4242.0.tmp"]
    for name in names:
        shutil.copy(ROLLOUTS[0], folder / name)  # a temporary file may hold a whole rollout
    manifest = batch.convert([sessions], tmp_path / "out").manifest
    skipped = {s["path"]: s["reason"] for s in manifest["skipped"].parse()}
    for name in names:
        assert "Codex's temporary file" in skipped[f"sessions/2026/02/23/{name}"]
    assert len(manifest["inputs"].parse()) == len(ROLLOUTS)


def test_a_damaged_compressed_file_is_skipped_and_the_rest_converts(sessions, tmp_path):
    paths = sorted(sessions.rglob("*.jsonl"))
    zst = compress(paths[0])
    zst.write_bytes(zst.read_bytes()[: zst.stat().st_size // 2])  # truncated
    (paths[1].parent / "rollout-2026-02-23T00-00-00-notzstd.jsonl.zst").write_bytes(b"not zstd at all\n")
    manifest = batch.convert([sessions], tmp_path / "out").manifest
    reasons = {s["path"].rsplit("/", 1)[1]: s["reason"] for s in manifest["skipped"].parse()}
    assert reasons[zst.name].startswith("cannot be read (damaged compressed file")
    assert reasons["rollout-2026-02-23T00-00-00-notzstd.jsonl.zst"].startswith("cannot be read (damaged compressed file")
    assert len(manifest["inputs"].parse()) == len(ROLLOUTS) - 1
    ids = {json.loads(p.read_text().splitlines()[0])["payload"]["id"] for p in paths[1:]}
    assert set(read_tables(tmp_path / "out")["sessions"]["session_key"]) == ids
