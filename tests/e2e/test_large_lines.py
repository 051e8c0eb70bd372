"""No single input takes the run down: a long line converts with its text intact, and a session
that needs more memory than the run may use is a declared loss while every other session converts."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import (
    FIXTURES,
    ROOT,
    SAMPLE,
    assert_same_as_full,
    assistant,
    dumps,
    read_manifest,
    read_tables,
    sorted_rows,
    timeless,
    tool_result,
    tool_use,
    uid,
    user,
)
from polars.testing import assert_frame_equal

import batch
import batch.incremental.deltas
import batch.pipeline
import batch.run.task
import batch.run.memory

BIG_SID = "44444444-4444-4444-8444-444444444444"


def big_session(folder: Path, mb: int, *, blocks: bool = False, sid: str = BIG_SID) -> str:
    """A session whose tool result is one line of about `mb` MiB of text; returns that text. With
    `blocks`, the text is in blocks of 64 KiB, none long enough to be elided (transforms/elide.py):
    the line is decoded whole."""
    text = ("0123456789abcdef" * 64 + "\n") * (mb * 1024 * 1024 // 1025)
    folder.mkdir(parents=True, exist_ok=True)
    result = tool_result(uid(3), uid(2), "toolu_BIG", text, sid=sid, result={"stdout": "", "stderr": "", "interrupted": False})
    if blocks:
        result["message"]["content"][0]["content"] = [
            {"type": "text", "text": text[i:i + (64 << 10)]} for i in range(0, len(text), 64 << 10)
        ]
    write_session(folder, sid, result)
    return text


def write_session(folder: Path, sid: str, long_line: dict) -> None:
    """A session of four lines in `folder`: a prompt, a tool call, `long_line` (its third), thanks."""
    lines = [
        user(uid(1), None, "read it", sid=sid),
        assistant(uid(2), uid(1), "msg_big1", [tool_use("toolu_BIG", name="Read", cmd="x")], sid=sid),
        long_line,
        user(uid(4), uid(3), "thanks", sid=sid),
    ]
    (folder / f"{sid}.jsonl").write_text("".join(dumps(line) + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    src = tmp_path / "projects"
    shutil.copytree(SAMPLE / "-Users-demo-viewer", src / "-Users-demo-viewer")
    return src


def test_a_long_line_converts_with_its_text_intact(archive, tmp_path):
    text = big_session(archive / "-big", 12)
    out = tmp_path / "out"
    batch.convert([archive], out)
    line = read_tables(out)["source_lines"].filter((pl.col("session_key") == BIG_SID) & (pl.col("line") == 3))
    assert line.get_column("status").to_list() == ["mapped"]
    # the tool result's text, read back from the record's verbatim line: same length and hash
    record = read_tables(out)["records"].filter(pl.col("session_key") == BIG_SID).sort("seq").row(2, named=True)
    content = json.loads(record["native"])["message"]["content"][0]["content"]
    assert len(content) == len(text)
    assert hashlib.sha256(content.encode()).hexdigest() == hashlib.sha256(text.encode()).hexdigest()


def test_a_line_that_does_not_fit_is_rejected_and_the_rest_converts(archive, tmp_path):
    big_session(archive / "-big", 20, blocks=True)
    line = (archive / "-big" / f"{BIG_SID}.jsonl").read_bytes().split(b"\n")[2]
    out, alone = tmp_path / "out", tmp_path / "alone"
    # a memory limit the ordinary sessions fit in and the 20 MiB line does not: DuckDB fails inside the
    # batch, each group is converted again alone, and the big one again with its long line rejected
    result = batch.convert([archive], out, memory_bytes=64 << 20, batch_bytes=64 << 20)
    assert "session_groups_not_converted" not in result.manifest["reuse"] and result.manifest["rejected_lines"] == 1
    t = read_tables(out)
    lines = t["source_lines"].filter(pl.col("session_key") == BIG_SID).sort("line")
    assert lines.select("line", "status", "reason").rows() == [
        (1, "mapped", None), (2, "mapped", None), (3, "rejected", "line_too_long"), (4, "mapped", None),
    ]
    [reject] = t["rejects"].filter(pl.col("reason") == "line_too_long").rows(named=True)
    assert reject["detail"] == f"a line of {len(line)} bytes needs more memory than this run may use (--memory-mb)"
    assert hashlib.sha256(reject["raw"]).hexdigest() == hashlib.sha256(line).hexdigest()
    assert t["records"].filter(pl.col("session_key") == BIG_SID).height == 3
    # every other session converted as it does without the large one
    shutil.rmtree(archive / "-big")
    batch.convert([archive], alone)
    want = read_tables(alone)
    for name in ("records", "parts", "inferences", "tool_calls", "source_lines"):
        got = t[name].filter(pl.col("session_key") != BIG_SID)
        assert_frame_equal(sorted_rows(timeless(got)), sorted_rows(timeless(want[name])), check_row_order=True)


def big_session_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every batch holding the big session run out of memory, as DuckDB does, whatever is tried."""
    real = batch.run.task.convert_on

    def failing(con, units, *args):
        if any(u.owner == BIG_SID for u in units):
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data (test)")
        return real(con, units, *args)

    monkeypatch.setattr(batch.run.task, "convert_on", failing)


def test_a_session_that_does_not_fit_even_so_is_a_declared_loss(archive, tmp_path, monkeypatch):
    big_session(archive / "-big", 1)
    big_session_out_of_memory(monkeypatch)
    out = tmp_path / "out"
    result = batch.convert([archive], out)
    assert result.manifest["reuse"]["session_groups_not_converted"] == 1
    [entry] = result.manifest["not_converted"]
    assert entry["session_key"] == BIG_SID and entry["files"] == [f"projects/-big/{BIG_SID}.jsonl"]
    assert "Out of Memory" in entry["error"]
    losses = read_tables(out)["losses"].filter(pl.col("category") == "memory.session_not_converted")
    assert losses.get_column("session_key").to_list() == [BIG_SID]
    assert {"path": f"projects/-big/{BIG_SID}.jsonl",
            "reason": "not converted: its session needs more memory than this run may use (see losses)"} \
        in result.manifest["skipped"].parse()
    assert read_tables(out)["records"].filter(pl.col("session_key") == BIG_SID).height == 0
    assert read_tables(out)["sessions"].height > 0
    # the next run tries it again
    monkeypatch.undo()
    again = batch.convert([archive], out)
    assert again.manifest["not_converted"] == []
    assert read_tables(out)["records"].filter(pl.col("session_key") == BIG_SID).height == 4


def test_a_batch_out_of_memory_is_converted_again_a_group_at_a_time(archive, tmp_path, monkeypatch):
    # the first attempt of the batch holding every group fails as DuckDB does; each group alone converts
    calls = []
    real = batch.run.task.convert_on

    def failing(con, units, *args):
        calls.append(sorted({u.owner for u in units}))
        if len(calls) == 1:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data (test)")
        return real(con, units, *args)

    monkeypatch.setattr(batch.run.task, "convert_on", failing)
    out = tmp_path / "out"
    result = batch.convert([archive], out)
    owners = calls[0]
    assert len(owners) > 1 and calls[1:] == [[o] for o in owners]
    assert "session_groups_not_converted" not in result.manifest["reuse"]
    monkeypatch.undo()
    full = tmp_path / "full"
    batch.convert([archive], full)
    got, want = read_tables(out), read_tables(full)
    for name in got:
        assert_frame_equal(sorted_rows(timeless(got[name])), sorted_rows(timeless(want[name])), check_row_order=True)


def test_the_cli_exits_0_and_counts_the_line_rejected(archive, tmp_path):
    big_session(archive / "-big", 20, blocks=True)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "batch", "convert", str(archive), "--out", str(out), "--memory-mb", "64"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "rejected lines 1" in proc.stdout
    assert read_manifest(out)["tables"]["sessions"] == read_tables(out)["sessions"].height > 0


def test_the_warning_before_a_stored_session_says_a_long_line_may_not_fit():
    from batch.sources.base import Loaded, Unit

    unit = Unit("big", 100 << 20, lambda: Loaded(), label="big")
    message = batch.run.memory.large_groups_message([[unit]], 48 << 20)
    assert "DuckDB's memory limited to 768 MiB (--memory-mb)" in message
    assert "(the largest: up to about 400 MiB of disk)" in message  # 4 x 100 MiB
    assert f"a line of more than about {768 // batch.run.memory.LINE_MEMORY_FACTOR} MB does not fit unless most of it " \
        "is in strings of 1 MiB or more" in message
    assert "rejects line_too_long, its bytes kept" in message
    # with --memory-mb 4096: the limit it gives
    message = batch.run.memory.large_groups_message([[unit]], 48 << 20, 4096 << 20)
    assert f"about {4096 // batch.run.memory.LINE_MEMORY_FACTOR} MB does not fit" in message


def long_line_session(folder: Path, sid: str, kind: str, mb: int) -> str:
    """A session whose third line, of about `mb` MiB, is a tool result, a prompt with an image block
    or a user message (as Claude Code writes them: the text in one JSON string); returns
    the long string."""
    n = mb << 20
    if kind == "image":
        text = base64.b64encode(bytes(range(256)) * (n * 3 // 4 // 256)).decode()
        line = user(uid(3), uid(2), "x", sid=sid)  # a screenshot pasted into a prompt
        line["message"]["content"] = [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": text}},
            {"type": "text", "text": "what is wrong here?"},
        ]
    elif kind == "tool_result":
        text = ("0123456789abcdef" * 64 + "\n") * (n // 1025)
        line = tool_result(uid(3), uid(2), "toolu_BIG", text, sid=sid, result={"stdout": text[:100], "stderr": ""})
    else:
        text = ("word \"quoted\" \\ é " * 64 + "\n") * (n // 1345)
        line = user(uid(3), uid(2), text, sid=sid)
    folder.mkdir(parents=True, exist_ok=True)
    write_session(folder, sid, line)
    return text


def digest(text: str | bytes) -> tuple[int, str]:
    data = text.encode() if isinstance(text, str) else text
    return len(data), hashlib.sha256(data).hexdigest()


def test_lines_of_100_and_300_mb_convert_with_the_default_memory(archive, tmp_path):
    # a 100 MB tool result, image and user message, and a 300 MB tool result, beside ordinary sessions:
    # their long strings are elided before the decode and restored in the tables (transforms/elide.py)
    kinds = {"tool_result": 100, "image": 100, "user": 100, "tool_result ": 300}
    sids = {kind: f"5555555{i}-4444-4444-8444-444444444444" for i, kind in enumerate(kinds)}
    texts = {kind: long_line_session(archive / f"-big{i}", sids[kind], kind.strip(), mb)
             for i, (kind, mb) in enumerate(kinds.items())}
    out = tmp_path / "out"
    result = batch.convert([archive], out)
    t = read_tables(out)
    assert result.manifest["rejected_lines"] == 0 and "session_groups_not_converted" not in result.manifest["reuse"]
    for kind, text in texts.items():
        sid = sids[kind]
        lines = t["source_lines"].filter(pl.col("session_key") == sid).sort("line")
        assert lines.get_column("status").to_list() == ["mapped"] * 4
        [native] = t["records"].filter((pl.col("session_key") == sid) & (pl.col("source_line") == 3)).get_column("native")
        # the record's verbatim line is the line of the file, byte for byte
        line = (archive / f"-big{list(kinds).index(kind)}" / f"{sid}.jsonl").read_bytes().split(b"\n")[2]
        assert digest(native) == digest(line)
        if kind.strip() == "image":
            part = t["parts"].filter((pl.col("session_key") == sid) & (pl.col("part_type") == "image")).row(0, named=True)
            assert part["media_type"] == "image/png"
            assert digest(json.loads(native)["message"]["content"][0]["source"]["data"]) == digest(text)
        else:
            [got] = t["parts"].filter(
                (pl.col("session_key") == sid) & (pl.col("source_line") == 3) & pl.col("text").is_not_null()
            ).get_column("text")
            assert digest(got) == digest(text)
    # the ordinary sessions are all there
    assert t["sessions"].filter(~pl.col("session_key").is_in(list(sids.values()))).height == result.tables["sessions"] - 4


def test_a_grown_group_whose_delta_runs_out_of_memory_is_converted_whole(archive, tmp_path, monkeypatch):
    out = tmp_path / "out"
    batch.convert([archive], out)
    grown = sorted((archive / "-Users-demo-viewer").glob("*.jsonl"))[0]
    sid = json.loads(grown.read_text().splitlines()[0]).get("sessionId")
    with grown.open("a") as fh:
        fh.write(dumps(user(uid(900), None, "one more", sid=sid)) + "\n")
    real = batch.run.task.convert_batch

    def failing(units, output, *args, **kw):  # a delta (converted into a capture) runs out of memory
        if isinstance(output, batch.incremental.deltas.Captured):
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data (test)")
        return real(units, output, *args, **kw)

    monkeypatch.setattr(batch.run.task, "convert_batch", failing)
    result = batch.convert([archive], out)
    assert result.manifest["reuse"]["deltas"]["converted_whole"] == 1
    assert result.manifest["reuse"]["deltas"]["session_groups"] == 0
    monkeypatch.undo()
    assert_same_as_full(archive, out, tmp_path)


def test_a_session_converted_before_that_does_not_fit_now_keeps_its_rows(archive, tmp_path, monkeypatch):
    big_session(archive / "-big", 1)
    out = tmp_path / "out"
    batch.convert([archive], out)
    before = read_tables(out)
    path = archive / "-big" / f"{BIG_SID}.jsonl"
    path.write_text(path.read_text() + dumps(user(uid(5), uid(4), "and this", sid=BIG_SID)) + "\n")
    big_session_out_of_memory(monkeypatch)  # now that it grew
    result = batch.convert([archive], out)
    [entry] = result.manifest["not_converted"]
    assert entry["session_key"] == BIG_SID and entry["previous_rows_kept"] is True
    t = read_tables(out)
    # the rows the first run wrote of it are all there, and the loss says this run did not convert it
    for name in ("records", "parts", "tool_calls", "source_lines", "inferences"):
        got = t[name].filter(pl.col("session_key") == BIG_SID)
        want = before[name].filter(pl.col("session_key") == BIG_SID)
        assert got.height == want.height > 0
        assert_frame_equal(sorted_rows(timeless(got)), sorted_rows(timeless(want)), check_row_order=True)
    assert t["losses"].filter(pl.col("category") == "memory.session_not_converted").get_column("session_key").to_list() \
        == [BIG_SID]
    # its session row too, read when the first run read it
    [row] = t["sessions"].filter(pl.col("session_key") == BIG_SID).rows(named=True)
    [first] = before["sessions"].filter(pl.col("session_key") == BIG_SID).rows(named=True)
    assert row["record_count"] == first["record_count"] == 4
    assert row["source_last_read_at"] == first["source_last_read_at"] and row["source_present"] is True
    # when it fits again, the next run converts it as a full conversion would
    monkeypatch.undo()
    again = batch.convert([archive], out)
    assert again.manifest["not_converted"] == []
    assert read_tables(out)["records"].filter(pl.col("session_key") == BIG_SID).height == 5
    assert_same_as_full(archive, out, tmp_path)


def test_a_codex_line_that_does_not_fit_is_rejected_and_the_rest_converts(tmp_path):
    rollout = FIXTURES / "codex" / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
    lines = rollout.read_bytes().splitlines()
    first = json.loads(lines[0])
    output = "0123456789abcdef" * (20 << 16)  # 20 MiB of a tool's output
    long = json.dumps({"timestamp": first["timestamp"], "type": "response_item", "payload": {
        "type": "function_call_output", "call_id": "call_BIG", "output": output}}).encode()
    src = tmp_path / "sessions" / rollout.name
    src.parent.mkdir(parents=True)
    src.write_bytes(b"\n".join([*lines[:3], long, *lines[3:]]) + b"\n")
    out = tmp_path / "out"
    result = batch.convert([tmp_path / "sessions"], out, memory_bytes=64 << 20, batch_bytes=64 << 20)
    assert result.manifest["rejected_lines"] == 1
    t = read_tables(out)
    status = t["source_lines"].sort("line").select("line", "status", "reason").rows()
    assert len(status) == len(lines) + 1
    assert status[3] == (4, "rejected", "line_too_long")
    assert all(s != "rejected" for line, s, _ in status if line != 4)
    [reject] = t["rejects"].rows(named=True)
    assert reject["raw"] == long  # its bytes kept
