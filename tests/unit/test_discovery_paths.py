"""Discovery holds the paths below a source as text (batch/sources/claude_code.py): its path helpers
give what pathlib gives, and a file's shown name, path and session are those of its place in the tree."""

from __future__ import annotations

import errno
import os
from pathlib import Path, PurePosixPath

import pytest

from batch.sources import claude_code

NAMES = [
    "a.jsonl", "a.jsonl.zst", ".jsonl", "a.", "a", "a.b.c", "..", ".hidden.zst", "rollout-1.jsonl.tmp",
    "agent-x.jsonl", "é.jsonl", "a..jsonl",
]
PATHS = [
    "/src/p/s/subagents/agent-a.jsonl", "src/p/s/subagents/agent-a.jsonl", "/subagents/agent-a.jsonl",
    "p/./s.jsonl", "p//s.jsonl", "/", "agent-a.jsonl", "/a/subagents/b/subagents/agent-c.jsonl",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_suffix_is_the_one_pathlib_gives(name):
    assert claude_code._suffix(name) == PurePosixPath(name).suffix


@pytest.mark.parametrize("path", PATHS)
def test_parts_are_the_ones_pathlib_gives(path):
    assert claude_code._parts(path) == list(PurePosixPath(path).parts)


def test_nested_files_are_named_and_read_by_their_place(tmp_path):
    main = "0b5f2b1c-6a3e-4c1e-9f1e-2f3c4d5e6f70"
    root = tmp_path / "projects"
    (root / "-proj" / main / "subagents").mkdir(parents=True)
    (root / "-proj" / f"{main}.jsonl").write_text('{"type":"user","sessionId":"%s"}\n' % main)
    (root / "-proj" / main / "subagents" / "agent-abc.jsonl").write_text('{"type":"user"}\n')
    (root / "-proj" / main / "subagents" / "agent-abc.meta.json").write_text('{"agentType":"x"}')
    (root / "-proj" / "notes.txt").write_text("no")
    found = claude_code.discover([root])
    by_name = {f.name: f for f in found.files}
    assert sorted(by_name) == [f"projects/-proj/{main}.jsonl", f"projects/-proj/{main}/subagents/agent-abc.jsonl"]
    sub = by_name[f"projects/-proj/{main}/subagents/agent-abc.jsonl"]
    assert sub.path == os.path.join(root.resolve(), "-proj", main, "subagents", "agent-abc.jsonl")
    assert (sub.stream_kind, sub.parent_session_id, sub.session_key) == ("subagent", main, f"{main}/abc")
    assert sub.sidecar == '{"agentType":"x"}'
    top = by_name[f"projects/-proj/{main}.jsonl"]
    assert (top.stream_kind, top.session_id, Path(top.path).read_text()[:9]) == ("main", main, '{"type":"')
    assert list(found.skipped) == [("projects/-proj/notes.txt", "not a .jsonl file")]


def test_a_folder_that_cannot_be_read_is_listed_by_its_shown_name(tmp_path, monkeypatch):
    root = tmp_path / "projects"
    (root / "proj" / "locked").mkdir(parents=True)
    real_walk = os.walk

    def walk(top, **options):  # as os.walk does when it cannot list a folder: onerror, then go on
        options.pop("onerror")(PermissionError(errno.EACCES, "Permission denied", os.path.join(top, "proj", "locked")))
        yield from real_walk(top, **options)

    monkeypatch.setattr(claude_code.os, "walk", walk)
    found = claude_code.discover([root])
    assert list(found.skipped) == [("projects/proj/locked", "folder cannot be read (Permission denied)")]
