"""The paths a run skipped are written to the run folder in sorted runs as they are found, and read
back merged: the manifest's `skipped` is the same as all of them held and sorted."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from conftest import SAMPLE

import batch
from batch.sources import skipped as skipped_module
from batch.sources.skipped import Skipped


def test_entries_come_back_sorted_across_runs(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(skipped_module, "RUN", 7)
    rng = random.Random(3)
    entries = [(f"projects/p{rng.randint(0, 40)}/é{rng.randint(0, 3)}.txt", rng.choice(["not a .jsonl file", "b"]))
               for _ in range(100)]
    held = Skipped(lambda: tmp_path)
    for entry in entries[:60]:
        held.append(entry)
    held += [list(e) for e in entries[60:]]  # as a batch's state entry gives them
    assert len(held) == 100 and held
    assert len(list(tmp_path.glob("skipped-*.jsonl"))) == 100 // 7  # the rest still held
    assert list(held) == sorted(entries)
    assert list(held) == sorted(entries)  # read again, the same


def test_none_skipped():
    held = Skipped(lambda: Path("/nonexistent"))  # no run written: the folder is not asked for
    assert not held and list(held) == []


def test_the_manifest_lists_every_skipped_path_sorted(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(skipped_module, "RUN", 3)
    archive = tmp_path / "projects"
    shutil.copytree(SAMPLE / "-Users-demo-viewer", archive / "-Users-demo-viewer")
    session = archive / "-Users-demo-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
    (session / "tool-results").mkdir(parents=True)
    names = [f"toolu_{n:03d}.txt" for n in (5, 1, 9, 3, 7, 2, 8)]
    for name in names:
        (session / "tool-results" / name).write_text("output")
    (archive / "-Users-demo-viewer" / "notes.txt").write_text("x")
    reason = "persisted tool result: its presence is evidence, its text is not converted"
    expected = sorted(
        [{"path": f"projects/-Users-demo-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a/tool-results/{n}", "reason": reason}
         for n in names] + [{"path": "projects/-Users-demo-viewer/notes.txt", "reason": "not a .jsonl file"}],
        key=lambda e: (e["path"], e["reason"]),
    )
    out = tmp_path / "out"
    batch.convert([archive], out)
    assert json.loads((out / "manifest.json").read_text())["skipped"] == expected
    # a re-run with nothing changed lists them again, from its own discovery
    batch.convert([archive], out)
    assert json.loads((out / "manifest.json").read_text())["skipped"] == expected
