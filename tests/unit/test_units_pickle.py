"""A unit of work can be described to another process: every unit the sources give pickles, and the
copy loads the same streams and frames as the unit itself (the ground for running batches as tasks
in worker processes)."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

from conftest import FIXTURES, SAMPLE
from entire_repos import build_scenario

from batch.formats import entire_checkpoint
from batch.sources.claude_code import discover
from batch.sources.base import fingerprint_of


def loaded(unit) -> tuple:
    """What loading the unit gives: each stream's name, kind, key and bytes' SHA-256, and the frames."""
    got = unit.load()
    streams = []
    for s in got.streams:
        with s.open() as fh:
            streams.append((s.name, s.stream_kind, s.session_key, s.producer_source, hashlib.sha256(fh.read()).hexdigest()))
    frames = {table: [f.to_dicts() for f in frames] for table, frames in sorted(got.frames.items())}
    return sorted(streams), frames, got.inputs


def test_claude_code_units_go_to_another_process():
    files = discover([SAMPLE]).files  # (its folder is there while it is)
    found = files.units()
    assert len(found) == len({u.owner for u in found}) > 1
    for unit in found:
        copy = pickle.loads(pickle.dumps(unit))
        # (the fingerprint is told from the unit's rows: the copy tells the same)
        assert (copy.owner, copy.size) == (unit.owner, unit.size)
        assert fingerprint_of(copy.fingerprint) == fingerprint_of(unit.fingerprint)
        assert loaded(copy) == loaded(unit)


def test_entire_units_go_to_another_process(tmp_path: Path):
    repo = build_scenario(tmp_path)["work"]
    found = entire_checkpoint.discover(repo).units
    assert found
    for unit in found:
        copy = pickle.loads(pickle.dumps(unit))
        assert (copy.owner, copy.size, copy.fingerprint) == (unit.owner, unit.size, unit.fingerprint)
        assert loaded(copy) == loaded(unit)


def test_units_of_an_earlier_output_go_to_another_process():
    from batch.sources import archive

    found = archive.discover(FIXTURES / "outputs" / "580ae78").units
    assert len(found) == len({u.owner for u in found}) > 1
    for unit in found:
        copy = pickle.loads(pickle.dumps(unit))
        assert (copy.owner, copy.size, copy.fingerprint) == (unit.owner, unit.size, unit.fingerprint)
        assert loaded(copy) == loaded(unit)
