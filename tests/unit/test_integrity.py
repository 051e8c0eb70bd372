"""The part files' record: read from the previous manifest an entry at a time, and each file of the new
output sealed in path order, keeping the recorded digest of a file hard-linked intact (batch/output/integrity.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from batch.output import integrity
from batch.output import manifest as mf


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sealed_in_path_order_keeping_the_digests_recorded_for_linked_files(tmp_path):
    previous, run = tmp_path / "out", tmp_path / "run"
    linked = ["records/part-00001.parquet", "records/part-00002.parquet", "_work/w/part-00001.parquet",
              "sessions/part-00001.parquet"]
    for i, rel in enumerate(linked):
        _write(previous / rel, b"x" * (i + 1))
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(previous / rel, run / rel)
    new = ["records/part-0123456789abcdef.parquet", "_work/part-00009.parquet", "_work/a/part-00003.parquet",
           "sessions/part-00002.parquet"]
    for rel in new:
        _write(run / rel, rel.encode())
    _write(run / "records" / "notes.txt", b"not a part")
    # the previous manifest records the linked files with a digest no file has (kept, so not read again),
    # but for records/part-00002, recorded out of order (read again), and one file no longer there
    fake = {rel: [i + 1, f"recorded-{i}"] for i, rel in enumerate(linked)}
    order = ["_work/w/part-00001.parquet", "records/part-00001.parquet", "records/gone/part-00001.parquet",
             "sessions/part-00001.parquet", "records/part-00002.parquet"]
    fake["records/gone/part-00001.parquet"] = [5, "gone"]
    files = {rel: fake[rel] for rel in order}
    mf.write(previous / "manifest.json", {"format": {"name": "asr"}, "files": files})

    recorded = integrity.Recorded(previous)
    assert list(recorded) == list(files.items())
    sealed = list(integrity.seal(run, previous, recorded))

    # the order of the paths as `sorted` orders them, each read, but the linked files recorded in order
    paths = sorted([*run.glob("*/part-*.parquet"), *run.glob("_work/*/part-*.parquet")])
    want = []
    for path in paths:
        rel = path.relative_to(run).as_posix()
        kept = rel in ("_work/w/part-00001.parquet", "records/part-00001.parquet", "sessions/part-00001.parquet")
        want.append((rel, fake[rel] if kept else [path.stat().st_size, _sha(path)]))
    assert sealed == want
    assert [rel for rel, _ in sealed][:3] == ["_work/a/part-00003.parquet", "_work/part-00009.parquet",
                                              "_work/w/part-00001.parquet"]

    # a damaged file's record is not taken, and it is read again
    intact = list(integrity.seal(run, previous, integrity.Recorded(previous, frozenset({"records/part-00001.parquet"}))))
    damaged = run / "records/part-00001.parquet"
    assert dict(intact)[damaged.relative_to(run).as_posix()] == [damaged.stat().st_size, _sha(damaged)]


def test_damaged_files_are_found_from_the_record_read_an_entry_at_a_time(tmp_path):
    out = tmp_path / "out"
    for rel, data in (("a/part-00001.parquet", b"abc"), ("a/part-00002.parquet", b"abcd"), ("b/part-00001.parquet", b"z")):
        _write(out / rel, data)
    files = {"a/part-00001.parquet": [3, _sha(out / "a/part-00001.parquet")],
             "a/part-00002.parquet": [4, "0" * 64],  # same size, another digest: found with verify only
             "b/part-00001.parquet": [2, _sha(out / "b/part-00001.parquet")],  # another size
             "c/part-00001.parquet": [1, "1" * 64],  # gone
             "d/part-00001.parquet": "not an entry"}
    (out / "manifest.json").write_text(json.dumps({"format": 1, "files": files}, indent=2) + "\n", encoding="utf-8")
    assert integrity.damaged(out, integrity.Recorded(out), verify=False) == {"b/part-00001.parquet", "c/part-00001.parquet"}
    assert integrity.damaged(out, integrity.Recorded(out), verify=True) == {
        "a/part-00002.parquet", "b/part-00001.parquet", "c/part-00001.parquet"}
    (out / "manifest.json").write_text('{\n  "format": 1,\n  "files": {\n    "b/part-00001.parquet": [2, "x"],\n    oops\n  }\n}\n',
                                       encoding="utf-8")
    assert list(integrity.Recorded(out)) == [("b/part-00001.parquet", [2, "x"])]  # what was read before the damage
    assert list(integrity.Recorded(tmp_path / "none")) == []
