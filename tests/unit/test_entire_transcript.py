"""Entire Transcript Format v1 mapped into core-table frames; expected values counted by hand with jq."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl

from batch.formats.entire_transcript import map_usage, read_etf
from batch.schema.core import INFERENCE_OBSERVATIONS, LOSSES, PARTS, RECORDS, REJECTS, SOURCE_LINES, TOOL_CALLS
from conftest import one, part_native
from entire_repos import fixture

CLAUDE = "v1branch_etf_claude_code_2.1.210.jsonl"
CODEX = "v1branch_etf_codex.jsonl"


def losses(frames) -> dict:
    return {row["category"]: row["count"] for row in frames.losses.iter_rows(named=True)}


def test_frames_have_the_core_table_columns():
    frames = read_etf(fixture(CLAUDE), session_key="s", source_file="t.jsonl")
    for frame, table in [
        (frames.records, RECORDS), (frames.parts, PARTS), (frames.tool_calls, TOOL_CALLS),
        (frames.observations, INFERENCE_OBSERVATIONS), (frames.source_lines, SOURCE_LINES),
        (frames.rejects, REJECTS), (frames.losses, LOSSES),
    ]:
        assert frame.columns == table.names, table.name


def test_real_claude_code_etf():
    # 12 lines: 2 user, 10 assistant; 9 tool_use blocks, 8 with an inlined result (line 5's second has none)
    frames = read_etf(fixture(CLAUDE), session_key="s", source_file="0/transcript.jsonl", compact_transcript_start=0)
    assert frames.source_lines.get_column("status").to_list() == ["mapped"] * 12
    assert frames.rejects.height == 0
    kinds = frames.records.get_column("kind").to_list()
    assert (kinds.count("message"), kinds.count("tool_result")) == (12, 8)
    assert frames.records.get_column("seq").to_list() == list(range(1, 21))
    assert frames.parts.height == 14 + 8
    assert frames.tool_calls.get_column("status").to_list().count("pending") == 1
    pending = frames.tool_calls.filter(pl.col("status") == "pending")
    assert pending.get_column("call_position").to_list() == ["line:5"]
    # the same id on lines 6 and 7 (a later fragment of one response): one observation, usage from line 6
    obs = frames.observations.filter(pl.col("inference_id") == "msg_011CdE2FY8jwGJq76aPfhNMp").row(0, named=True)
    assert (obs["input_uncached_tokens"], obs["input_total_tokens"], obs["input_includes_cache"]) == (2, None, None)
    assert (obs["output_total_tokens"], obs["line_count"], obs["usage_source_line"]) == (3782, 2, 6)
    assert obs["record_id"] == "s:line:6"
    assert frames.observations.height == 8
    assert losses(frames) == {"reasoning": None, "inference.model": None, "tool_result.content": 8, "usage.cache": 9}
    first = frames.records.row(0, named=True)
    assert first["timestamp"] == datetime(2026, 7, 20, 21, 27, 59, 89000, tzinfo=UTC)
    assert first["turn_id"] == "671455ef-a8fd-4837-9096-b335a97d7bbf"  # the prompt's id, carried forward
    assert frames.records.row(1, named=True)["turn_id"] == first["turn_id"]
    assert frames.first_line == 1


def test_parts_name_their_block_in_the_line():
    frames = read_etf(fixture(CLAUDE), session_key="s", source_file="0/transcript.jsonl")
    tables = {"source_lines": frames.source_lines, "records": frames.records}
    for part in frames.parts.iter_rows(named=True):
        block = part_native(tables, part)
        if part["part_type"] == "tool_result":  # an inlined result is the record after its call
            assert block == json.loads(one(frames.records, record_id=part["record_id"])["native"])
        else:
            assert block.get("type", "text") == part["part_type"], part["native_path"]


def test_real_codex_etf_has_no_per_call_usage():
    # 39 lines: 7 user, 32 assistant without id or token fields; 25 tool_use blocks, 24 with a result
    frames = read_etf(fixture(CODEX), session_key="c", source_file="0/transcript.jsonl")
    assert frames.observations.height == 0
    assert frames.records.get_column("inference_id").null_count() == frames.records.height
    assert losses(frames) == {"reasoning": None, "inference.model": None, "tool_result.content": 24,
                              "per_call_usage": 32}
    assert frames.tool_calls.height == 25


def test_token_mapping_and_the_input_rule():
    base = {"v": 1, "type": "assistant", "input_tokens": 100, "output_tokens": 7, "cache_read_tokens": 40,
            "cache_write_tokens": 5, "reasoning_tokens": 3}
    claude = map_usage({**base, "agent": "claude-code"})
    codex = map_usage({**base, "agent": "codex"})
    assert (claude["input_uncached_tokens"], claude["input_total_tokens"]) == (100, None)
    assert (codex["input_uncached_tokens"], codex["input_total_tokens"], codex["input_includes_cache"]) == (None, 100, None)
    for usage in (claude, codex):
        assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (40, 5)
        assert (usage["output_total_tokens"], usage["output_reasoning_tokens"]) == (7, 3)
    assert map_usage({"v": 1, "type": "assistant"})["output_total_tokens"] is None  # not reported is null, never 0


def test_bad_lines_are_rejected_and_accounted_for():
    lines = [
        b'{"v":1,"type":"user","content":"a plain string"}',
        b"{not json",
        b'{"v":2,"type":"user","content":[]}',
        b'["an", "array"]',
        b'{"v":1,"content":[]}',
        b"",
        b'{"v":1,"type":"assistant","id":"m1","ts":"2026-01-01T00:00:00+01:00","content":null}',
        b'{"v":1,"type":"user","content":[{"text":"caf\xe9"}]}',
    ]
    frames = read_etf(b"\n".join(lines), session_key="s", source_file="t.jsonl", compact_transcript_start=3)
    assert frames.rejects.select("line", "reason").rows() == [
        (2, "invalid_json"), (3, "unsupported_version"), (4, "not_an_object"), (5, "missing_type"),
    ]
    assert frames.rejects.get_column("raw").to_list()[0] == b"{not json"
    # the blank line 6 is not a source line; line 8 is not UTF-8: its bytes are kept
    assert frames.source_lines.select("line", "status").rows() == [
        (1, "mapped"), (2, "rejected"), (3, "rejected"), (4, "rejected"), (5, "rejected"), (7, "mapped"), (8, "mapped"),
    ]
    assert frames.source_lines.get_column("raw").to_list()[-1] == lines[-1]
    assert frames.source_lines.get_column("byte_offset").to_list()[:2] == [0, len(lines[0]) + 1]
    assert frames.parts.select("record_id", "part_type", "text").rows() == [
        ("s:line:1", "text", "a plain string"), ("s:line:8", "text", "caf\ufffd"),
    ]
    assert frames.records.get_column("timestamp").to_list()[1] == datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    assert losses(frames)["timestamps"] == 2  # lines 1 and 8
    assert "usage.cache" not in losses(frames) and losses(frames)["per_call_usage"] == 1
    assert frames.first_line == 4
    assert json.loads(frames.records.get_column("native").to_list()[0])["content"] == "a plain string"
