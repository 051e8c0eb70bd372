"""Codex rollouts are told apart from Claude Code files by their first line (batch/sources/codex.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from batch.sources import codex
from batch.sources.base import fingerprint_entries
from batch.sources.registry import discover
from conftest import CORPUS, FIXTURES

CODEX = FIXTURES / "codex"
OLD = CODEX / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"


def first(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


def test_every_fixture_is_a_rollout_with_its_first_lines_id():
    for path in CODEX.rglob("*.jsonl"):
        meta = codex.rollout_meta(path)
        assert meta is not None and meta["id"] == first(path)["payload"]["id"], path


def test_claude_code_files_are_not_rollouts():
    for path in sorted(CORPUS.rglob("*.jsonl"))[:20]:
        assert codex.rollout_meta(path) is None, path


def test_the_legacy_first_line_is_a_rollout(tmp_path):
    # reference §2.1: before 0.32 the first line is {id, timestamp, instructions[, git]}, with no type
    path = tmp_path / "rollout-2025-08-11T10-00-00-0198a5c0-0000-4000-8000-000000000001.jsonl"
    head = {"id": "0198a5c0-0000-4000-8000-000000000001", "timestamp": "2025-08-11T10:00:00.000Z",
            "instructions": None, "git": {"branch": "main"}}
    path.write_text(json.dumps(head) + "\n" + json.dumps({"record_type": "state"}) + "\n")
    assert codex.rollout_meta(path)["id"] == head["id"]
    path.write_text(json.dumps({"id": "x", "timestamp": "t"}) + "\n")  # no instructions: not a rollout
    assert codex.rollout_meta(path) is None


def test_a_long_first_line_is_read_whole(tmp_path):
    obj = first(OLD)
    obj["payload"]["base_instructions"] = {"text": "x" * 200_000}  # 0.88+: tens of KB
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(obj) + "\n")
    assert codex.rollout_meta(path)["id"] == obj["payload"]["id"]


def test_a_subagent_names_its_parent_thread():
    meta = {"id": "c", "source": {"subagent": {"thread_spawn": {"parent_thread_id": "p", "depth": 1}}}}
    assert codex.parent_thread(meta) == "p" and codex.is_subagent(meta)
    assert codex.parent_thread({"id": "c", "parent_thread_id": "q", "thread_source": "subagent"}) == "q"
    assert codex.parent_thread({"id": "c", "source": "cli"}) is None and not codex.is_subagent({"source": "cli"})


def test_a_mixed_folder_routes_each_file_to_its_format(tmp_path):
    claude = sorted(CORPUS.rglob("*.jsonl"))[0]
    shutil.copy(claude, tmp_path / claude.name)
    shutil.copy(OLD, tmp_path / OLD.name)
    found = discover([tmp_path], [], combine=False)
    formats = sorted(s.producer_source for u in found.units for s in u.load().streams)
    assert formats == ["claude-code-jsonl", "codex-rollout-jsonl"]
    unit = next(u for u in found.units if u.owner == first(OLD)["payload"]["id"])
    assert unit.size == OLD.stat().st_size and fingerprint_entries(unit.fingerprint)[0][0].endswith(OLD.name)


def test_a_rollout_is_named_by_its_thread_and_rollout_id():
    # reference §14.5: thread/revert names the next rollout rollout-<ts>-<thread>_<rollout>.jsonl; any
    # other name (the thread's first rollout, an Entire copy) is the rollout of the thread's own ID
    thread, rollout = "01a0c331-8e80-73c4-8d5e-7a6b5c4d3e2f", "01a0c343-de00-74d5-8e6f-6a5b4c3d2e1f"
    assert codex.rollout_id(f"s/2026/09/21/rollout-2026-09-21T11-20-00-{thread}_{rollout}.jsonl", thread) == rollout
    assert codex.rollout_id(f"s/rollout-2026-09-21T11-20-00-{thread}_{rollout}.jsonl.zst", thread) == rollout
    assert codex.rollout_id(f"s/rollout-2026-09-21T11-00-00-{thread}.jsonl", thread) == thread
    assert codex.rollout_id("repo/c0dec0dec0de/0/full.jsonl", thread) == thread
    # an underscore that does not follow the thread's ID names no rollout of it
    assert codex.rollout_id(f"my_folder/rollout-2026-09-21T11-00-00-{thread}.jsonl", thread) == thread
    assert codex.rollout_id(f"s/rollout-2026-09-21T11-00-00-{rollout}_x.jsonl", thread) == thread
