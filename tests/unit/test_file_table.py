"""The files discovery found, held as rows of files in the run folder (batch/sources/files.py): the units
made of them are those the streams give when grouped in memory, and each loads its own streams back."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random

import pytest

from batch.sources import files as ft
from batch.sources.base import CLAUDE_CODE, Stream, fingerprint_of

CODEX = "codex-rollout-jsonl"


def _streams(n: int) -> list[Stream]:
    """`n` files: main sessions, their subagents (some with a sidecar), and Codex rollouts, two of
    one thread; paths with bytes that are not UTF-8."""
    out = []
    for i in range(n):
        sid = f"{i // 4:06d}-s"
        if i % 4 == 0:
            out.append(Stream(f"p/{sid}.jsonl", 10 + i, "main", sid, sid, path=f"/a/\udce9/{sid}.jsonl", mtime_ns=i))
        elif i % 4 in (1, 2):
            agent = f"a{i}"
            out.append(Stream(f"p/{sid}/subagents/agent-{agent}.jsonl", 10 + i, "subagent", agent, f"{sid}/{agent}", sid,
                              agent, '{"agentType":"x"}' if i % 4 == 1 else None, path=f"/a/{sid}/{agent}.jsonl",
                              mtime_ns=1000 - i))
        else:
            thread = f"t{i // 8}"  # two rollouts of each thread
            out.append(Stream(f"c/rollout-{i}-{thread}.jsonl", 10 + i, "main", thread, thread, producer_source=CODEX,
                              path=f"/c/rollout-{i}.jsonl", mtime_ns=i, codec="zstd" if i % 8 == 3 else None))
    return out


def _expected(streams: list[Stream]) -> list[tuple]:
    """The units as grouping the streams in memory gives them: a Claude Code group per owner (its
    files' fingerprint entries sorted by their JSON text, as one compact JSON text), by owner; then a
    unit per rollout, by session and name."""
    def text(entries: list) -> str:
        return json.dumps(entries, separators=(",", ":"))

    groups: dict[str, list[Stream]] = {}
    for s in streams:
        if s.producer_source == CLAUDE_CODE:
            owner = s.parent_session_id if s.stream_kind == "subagent" else s.session_key
            groups.setdefault(owner, []).append(s)
    claude = [
        (owner, sum(s.size for s in g), max(s.mtime_ns for s in g), text(sorted((
            [s.name, s.size, s.mtime_ns, hashlib.sha256(s.sidecar.encode()).hexdigest() if s.sidecar else None] for s in g
        ), key=json.dumps)), sorted(g, key=lambda s: (s.session_key, s.name)))
        for owner, g in sorted(groups.items())
    ]
    rollouts = [
        (s.session_key, s.size, s.mtime_ns, text([[s.name, s.size, s.mtime_ns, None]]), [s])
        for s in sorted((s for s in streams if s.producer_source == CODEX), key=lambda s: (s.session_key, s.name))
    ]
    return claude + rollouts


@pytest.mark.parametrize(("n", "batch_rows"), [(0, 1024), (1, 1024), (9, 1024), (3000, 1024), (300, 1)],
                         ids=["none", "one", "a few", "many slices", "a group over record batches"])
def test_units_are_those_of_the_streams_grouped_in_memory(tmp_path, monkeypatch, n, batch_rows):
    monkeypatch.setattr(ft, "BATCH_ROWS", batch_rows)
    streams = _streams(n)
    random.Random(n).shuffle(streams)  # the order a walk finds them in does not matter
    table = ft.FileTable(tmp_path)
    for s in streams:
        table.add(s, (s.agent_id, s.session_id))
    assert len(table) == n and sorted(f.name for f in table) == sorted(s.name for s in streams)
    units = table.units()
    got = [(u.owner, u.size, u.newest, fingerprint_of(u.fingerprint), u.load().streams) for u in units]
    assert got == _expected(streams)
    # a unit's fingerprint is told from its rows when asked: the run holds no text of it; told in bulk,
    # a record batch read once for the units in order, each is the same
    assert not any(isinstance(u.fingerprint, str) for u in units)
    assert list(ft.fingerprint_texts(u.fingerprint for u in units)) == [fp for _, _, _, fp, _ in got]
    # a unit goes to another process as its rows' place, and loads the same streams there
    for unit in units[:50]:
        assert pickle.loads(pickle.dumps(unit)).load().streams == unit.load().streams
    assert os.listdir(tmp_path) == ["files-by-group.arrow"]  # the buckets' rows are in it


def test_heads_and_rows_are_read_back_by_name(tmp_path):
    streams = _streams(12)
    table = ft.FileTable(tmp_path, refine=lambda s, session: s)
    for s in streams:
        table.add(s, ("agent" if s.stream_kind == "subagent" else None, s.session_id))
    wanted = {streams[1].name, streams[3].name, "not/found.jsonl"}
    assert dict(table.heads(wanted)) == {
        streams[1].name: [streams[1].size, streams[1].mtime_ns, "agent", streams[1].session_id],
        streams[3].name: [streams[3].size, streams[3].mtime_ns, None, streams[3].session_id],
    }
    assert dict(table.heads(wanted, producer=CLAUDE_CODE)).keys() == {streams[1].name}
    assert table.streams_named(wanted) == {streams[1].name: streams[1], streams[3].name: streams[3]}
    table.units()
    assert dict(table.heads()) == {s.name: [s.size, s.mtime_ns, "agent" if s.stream_kind == "subagent" else None,
                                            s.session_id] for s in streams}
    with pytest.raises(ValueError, match="no file can be added"):
        table.add(streams[0], (None, None))


def test_the_stream_a_file_is_read_as_is_the_refined_one(tmp_path):
    plain = Stream("p/x.jsonl", 5, "main", "x", "x", path="/p/x.jsonl", mtime_ns=1)
    table = ft.FileTable(tmp_path, refine=lambda s, session: Stream(
        s.name, s.size, "main", "thread", "thread", producer_source=CODEX, path=s.path, mtime_ns=s.mtime_ns,
    ) if session is None else s)
    table.add(plain, (None, None))
    table.add(Stream("p/y.jsonl", 6, "main", "y", "y", path="/p/y.jsonl", mtime_ns=2), (None, "y"))
    # (a Claude Code group is named by its owner; a rollout by its file)
    assert [(u.owner, u.label, [s.producer_source for s in u.load().streams]) for u in table.units()] == [
        ("y", "", [CLAUDE_CODE]), ("thread", "p/x.jsonl", [CODEX]),
    ]
