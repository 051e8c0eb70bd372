"""Conversion rules, each checked on small authored Claude Code lines."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import batch
import batch.formats.claude_code
import batch.pipeline
import batch.run.finalize
import batch.run.task
from batch.errors import OutputError, SourceError
from batch.reuse import part_id
from batch.schema import TABLES
from batch.sources.claude_code import discover
from batch.sources.files import group_owner
from conftest import (
    SID,
    SID2,
    TEXT,
    THINKING,
    assistant,
    dumps,
    read_tables,
    rows,
    run,
    tool_result,
    tool_use,
    uid,
    timeless,
    usage,
    user,
    write_jsonl,
)

STATUSES = {"mapped", "folded", "duplicate", "recovered", "rejected", "uncommitted", "foreign"}


def by_line(source_lines: pl.DataFrame, name_suffix: str = "") -> dict:
    """{(line, sub): row} of source_lines, for the file whose name ends with name_suffix."""
    rows = source_lines.filter(pl.col("source_file").str.ends_with(name_suffix)).iter_rows(named=True)
    return {(r["line"], r["sub"]): r for r in rows}


def one(df: pl.DataFrame) -> dict:
    assert df.height == 1, df
    return df.row(0, named=True)


def file_name(src: Path, path: Path) -> str:
    """The source_file value the converter gives a file under `src` (root name / relative path)."""
    return f"{src.name}/{path.relative_to(src).as_posix()}"


# ---------------------------------------------------------------------------------------------
# 1. Folding responses that share message.id
# ---------------------------------------------------------------------------------------------


def test_three_block_lines_fold_into_one_response(src, out):
    lines = [
        user(uid(1), None, "list the files"),
        assistant(uid(2), uid(1), "msg_01Fold", [THINKING], output=3, stop=None),
        assistant(uid(3), uid(2), "msg_01Fold", [TEXT], output=3, stop=None),
        assistant(uid(4), uid(3), "msg_01Fold", [tool_use("toolu_01A")], output=212, stop="tool_use",
                  usage_=usage(212, input_=9, cache_write=300, cache_read=40)),
    ]
    path = write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    rec = one(t["records"].filter(pl.col("message_id") == "msg_01Fold"))
    assert rec["record_id"] == f"{SID}:msg:msg_01Fold"
    assert rec["assembly_mode"] == "folded"
    assert rec["observation_count"] == 3
    assert rec["has_revision_history"] is False  # ordinary growth is not revision history
    assert rec["position"] == "line:2"
    assert rec["source_line"] == 2
    assert rec["uuid"] == uid(2)
    assert rec["inference_id"] == "msg_01Fold"
    assert rec["native"] == dumps(lines[3])

    parts = t["parts"].filter(pl.col("record_id") == rec["record_id"]).sort("part_index")
    assert parts["part_index"].to_list() == [0, 1, 2]
    assert parts["part_type"].to_list() == ["thinking", "text", "tool_use"]
    assert parts["source_line"].to_list() == [2, 3, 4]
    assert parts["text"].to_list()[:2] == ["Let me look.", "I'll list the files."]
    assert parts["call_id"].to_list()[2] == "toolu_01A"

    inf = one(t["inferences"])
    assert inf["inference_id"] == "msg_01Fold"
    assert inf["record_id"] == rec["record_id"]
    assert inf["stop_reason"] == "tool_use"
    assert inf["output_total_tokens"] == 212
    assert inf["input_uncached_tokens"] == 9
    assert inf["cache_write_tokens"] == 300
    assert inf["cache_read_tokens"] == 40
    assert inf["input_total_tokens"] == 9 + 300 + 40
    assert inf["usage_position"] == "line:4"
    assert inf["usage_source_line"] == 4
    assert inf["usage_complete"] is True

    sl = by_line(t["source_lines"], path.name)
    assert [sl[(n, None)]["status"] for n in (2, 3, 4)] == ["folded", "folded", "mapped"]
    assert {sl[(n, None)]["record_id"] for n in (2, 3, 4)} == {rec["record_id"]}
    # folded lines are not verbatim in records.native: their JSON stays in source_lines.native
    assert sl[(2, None)]["native"] == dumps(lines[1])
    assert sl[(3, None)]["native"] == dumps(lines[2])
    assert sl[(4, None)]["native"] is None


def test_non_contiguous_lines_of_one_response_still_fold(src, out):
    lines = [
        user(uid(1), None, "run two commands"),
        assistant(uid(2), uid(1), "msg_01Split", [tool_use("toolu_01A", cmd="ls")], output=5),
        tool_result(uid(3), uid(2), "toolu_01A", "a.txt"),
        assistant(uid(4), uid(3), "msg_01Split", [tool_use("toolu_01B", cmd="pwd")], output=88, stop="tool_use"),
        tool_result(uid(5), uid(4), "toolu_01B", "/home/user/project"),
    ]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    records = t["records"].sort("seq")
    assert records.height == 4
    assert records["native_type"].to_list() == ["user", "assistant", "user", "user"]
    rec = one(records.filter(pl.col("message_id") == "msg_01Split"))
    assert rec["assembly_mode"] == "folded"
    assert rec["seq"] == 2
    assert rec["position"] == "line:2"
    parts = t["parts"].filter(pl.col("record_id") == rec["record_id"]).sort("part_index")
    assert parts["call_id"].to_list() == ["toolu_01A", "toolu_01B"]
    assert parts["source_line"].to_list() == [2, 4]
    calls = t["tool_calls"].sort("call_id")
    assert calls["call_record_id"].to_list() == [rec["record_id"], rec["record_id"]]
    assert calls["status"].to_list() == ["completed", "completed"]
    assert one(t["inferences"])["output_total_tokens"] == 88


def test_identical_blocks_on_two_lines_fold_into_one_part(src, out):
    # The non-streaming fallback writes the whole message again after a per-block line.
    lines = [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01Rep", [TEXT], output=3),
        assistant(uid(3), uid(2), "msg_01Rep", [TEXT, tool_use("toolu_01A")], output=40, stop="tool_use"),
    ]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    rec = one(t["records"].filter(pl.col("native_type") == "assistant"))
    assert rec["assembly_mode"] == "folded"
    parts = t["parts"].filter(pl.col("record_id") == rec["record_id"]).sort("part_index")
    assert parts["part_type"].to_list() == ["text", "tool_use"]
    assert parts["source_line"].to_list() == [2, 3]


# ---------------------------------------------------------------------------------------------
# 2. Repeated uuids
# ---------------------------------------------------------------------------------------------


def test_identical_copy_of_a_uuid_is_one_record_and_the_copy_is_a_duplicate(src, out):
    prompt = user(uid(1), None, "explain the build")
    lines = [prompt, prompt, assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn")]
    path = write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    rec = one(t["records"].filter(pl.col("uuid") == uid(1)))
    assert rec["position"] == "line:1"
    assert rec["has_revision_history"] is False
    assert rec["observation_count"] == 2
    assert t["records"].height == 2

    sl = by_line(t["source_lines"], path.name)
    assert sl[(1, None)]["status"] == "mapped"
    assert (sl[(2, None)]["status"], sl[(2, None)]["reason"]) == ("duplicate", "identical_copy")
    assert sl[(2, None)]["record_id"] == rec["record_id"]


def test_overwritten_uuid_keeps_latest_content_at_first_position(src, out):
    first = user(uid(1), None, "draft prompt", ts="2026-02-12T20:30:00.000Z")
    second = user(uid(1), None, "edited prompt", ts="2026-02-12T20:30:09.000Z")
    lines = [
        first,
        assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn"),
        second,
    ]
    path = write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    records = t["records"].sort("seq")
    rec = one(records.filter(pl.col("uuid") == uid(1)))
    assert rec["position"] == "line:1"
    assert rec["source_line"] == 1
    assert rec["seq"] == 1  # before the response on line 2
    assert rec["native"] == dumps(second)
    assert json.loads(rec["native"])["message"]["content"] == "edited prompt"
    assert rec["has_revision_history"] is True

    sl = by_line(t["source_lines"], path.name)
    assert (sl[(1, None)]["status"], sl[(1, None)]["reason"]) == ("duplicate", "overwritten_snapshot")
    assert sl[(1, None)]["native"] == dumps(first)
    assert sl[(1, None)]["record_id"] == rec["record_id"]
    assert sl[(3, None)]["status"] == "mapped"
    assert sl[(3, None)]["record_id"] == rec["record_id"]
    parts = t["parts"].filter(pl.col("record_id") == rec["record_id"])
    assert parts["text"].to_list() == ["edited prompt"]


# ---------------------------------------------------------------------------------------------
# 3. Usage selection
# ---------------------------------------------------------------------------------------------


def test_missing_usage_fields_are_null_not_zero(src, out):
    # 1.0.17 shape: no cache_creation split; second response also omits cache_read; third has no usage.
    old = {"input_tokens": 4, "cache_creation_input_tokens": 14363, "cache_read_input_tokens": 0,
           "output_tokens": 3, "service_tier": "standard"}
    lines = [
        user(uid(1), None, "push to github"),
        assistant(uid(2), uid(1), "msg_01Old", [TEXT], stop="end_turn", usage_=old),
        user(uid(3), uid(2), "and again"),
        assistant(uid(4), uid(3), "msg_01NoRead", [TEXT], stop="end_turn",
                  usage_={"input_tokens": 7, "output_tokens": 11}),
        user(uid(5), uid(4), "once more"),
        assistant(uid(6), uid(5), "msg_01NoUsage", [TEXT], stop="end_turn", usage_={}),
    ]
    # usage_={} is falsy-but-not-None: the builder keeps it; strip it to model a line without usage
    del lines[5]["message"]["usage"]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)
    inf = {r["inference_id"]: r for r in t["inferences"].iter_rows(named=True)}

    a = inf["msg_01Old"]
    assert a["cache_write_tokens"] == 14363
    assert a["cache_read_tokens"] == 0  # a reported zero stays zero
    assert a["cache_write_5m_tokens"] is None
    assert a["cache_write_1h_tokens"] is None
    assert a["input_total_tokens"] == 4 + 14363
    assert a["output_reasoning_tokens"] is None

    b = inf["msg_01NoRead"]
    assert b["input_uncached_tokens"] == 7
    assert b["output_total_tokens"] == 11
    assert b["cache_read_tokens"] is None
    assert b["cache_write_tokens"] is None
    assert b["input_total_tokens"] is None

    c = inf["msg_01NoUsage"]
    for col in ("input_uncached_tokens", "input_total_tokens", "input_includes_cache", "cache_read_tokens",
                "cache_write_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens",
                "output_total_tokens", "service_tier"):
        assert c[col] is None, col


@pytest.mark.parametrize(
    ("model", "flag"),
    [("<synthetic>", True), ("<synthetic>", None), ("claude-opus-4-6", True)],
    ids=["synthetic-flagged", "synthetic-model-only", "api-error-flag-only"],
)
def test_synthetic_api_error_lines_are_not_inferences(src, out, model, flag):
    zero = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "service_tier": None,
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0}}
    extra = {"isApiErrorMessage": flag, "error": "invalid_request"} if flag else {}
    lines = [
        user(uid(1), None, "summarize the repo"),
        assistant(uid(2), uid(1), "553e41ca-ada2-45af-8c8f-b2711b3dfe1f",
                  [{"type": "text", "text": "Prompt is too long"}], model=model, stop="stop_sequence",
                  request_id=None, usage_=zero, **extra),
        assistant(uid(3), uid(2), "msg_01Real", [TEXT], stop="end_turn", output=30),
    ]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    assert t["inferences"]["inference_id"].to_list() == ["msg_01Real"]
    assert t["inference_observations"]["inference_id"].to_list() == ["msg_01Real"]
    err = one(t["records"].filter(pl.col("uuid") == uid(2)))
    assert err["inference_id"] is None
    assert err["is_api_error"] is True
    assert err["author"] == "harness"


def test_resume_copy_in_two_files_gives_one_inference_and_two_observations(src, out):
    # SID2 holds the original response with its final usage; SID is a resume copy holding only
    # the first streamed block (placeholder usage, no stop reason). SID sorts first, so neither
    # the session_key tie-break nor file order may pick the selected observation.
    prompt = user(uid(1), None, "fix the test", sid=SID2)
    first = assistant(uid(2), uid(1), "msg_01Resume", [THINKING], output=3, sid=SID2)
    last = assistant(uid(3), uid(2), "msg_01Resume", [TEXT], output=250, stop="end_turn", sid=SID2)
    # a second inference whose copy without stop reason has the larger output count
    cut_final = assistant(uid(12), uid(3), "msg_01Cut", [TEXT], output=120, stop="end_turn", sid=SID2)
    write_jsonl(src / f"{SID2}.jsonl", [prompt, first, last, cut_final])
    copy = [
        {**prompt, "sessionId": SID},
        {**first, "sessionId": SID},
        user(uid(10), uid(2), "continue", sid=SID),
        assistant(uid(11), uid(10), "msg_01Cut", [TEXT], output=900, sid=SID),
    ]
    write_jsonl(src / f"{SID}.jsonl", copy)
    t = run(src, out)

    infs = t["inferences"]
    assert infs["inference_id"].is_unique().all()
    obs = t["inference_observations"]
    for inference_id in ("msg_01Resume", "msg_01Cut"):
        rows = obs.filter(pl.col("inference_id") == inference_id)
        assert rows.height == 2, rows
        assert rows["is_selected"].sum() == 1
        selected = one(rows.filter(pl.col("is_selected")))
        assert selected["stop_reason"] == "end_turn"
        inf = one(infs.filter(pl.col("inference_id") == inference_id))
        assert inf["session_key"] == selected["session_key"]
        assert inf["record_id"] == selected["record_id"]
        assert inf["stop_reason"] == "end_turn"
        assert inf["usage_complete"] is True
        assert inf["observation_count"] == 2

    resume = one(infs.filter(pl.col("inference_id") == "msg_01Resume"))
    assert resume["session_key"] == SID2
    assert resume["output_total_tokens"] == 250
    assert one(infs.filter(pl.col("inference_id") == "msg_01Cut"))["output_total_tokens"] == 120


def test_usage_complete_is_false_without_stop_reason(src, out):
    lines = [
        user(uid(1), None, "go"),
        assistant(uid(2), uid(1), "msg_01Open", [TEXT], output=4, stop=None),
    ]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)
    inf = one(t["inferences"])
    assert inf["stop_reason"] is None
    assert inf["usage_complete"] is False
    assert inf["output_total_tokens"] == 4
    loss = one(t["losses"].filter(pl.col("category") == "usage_incomplete"))
    assert (loss["session_key"], loss["count"]) == (SID, 1)


# ---------------------------------------------------------------------------------------------
# 4. Ordering
# ---------------------------------------------------------------------------------------------


def test_seq_follows_file_position_not_timestamps(src, out):
    lines = [
        user(uid(1), None, "first in file", ts="2026-02-12T20:30:30.000Z"),
        assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn", ts="2026-02-12T20:30:10.000Z"),
        user(uid(3), uid(2), "third in file", ts="2026-02-12T20:29:00.000Z"),
        {"type": "summary", "summary": "A title", "leafUuid": uid(3)},
        user(uid(4), uid(3), "fifth in file", ts="2026-02-12T20:30:20.000Z"),
    ]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)
    records = t["records"].sort("seq")
    assert records["seq"].to_list() == [1, 2, 3, 4, 5]
    assert records["source_line"].to_list() == [1, 2, 3, 4, 5]
    assert records["position"].to_list() == [f"line:{n}" for n in range(1, 6)]
    session = one(t["sessions"])
    assert str(session["started_at"]) == "2026-02-12 20:29:00+00:00"
    assert str(session["ended_at"]) == "2026-02-12 20:30:30+00:00"


# ---------------------------------------------------------------------------------------------
# 5-8. Damaged and foreign input
# ---------------------------------------------------------------------------------------------


def test_concatenated_objects_on_one_line_are_recovered(src, out):
    a = user(uid(2), uid(1), "second prompt")
    b = user(uid(3), uid(2), "third prompt")
    lines = [user(uid(1), None, "first prompt"), dumps(a) + dumps(b), user(uid(4), uid(3), "fourth")]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    records = t["records"].sort("seq")
    assert records["position"].to_list() == ["line:1", "line:2#1", "line:2#2", "line:3"]
    assert records["uuid"].to_list() == [uid(1), uid(2), uid(3), uid(4)]
    assert records.filter(pl.col("uuid") == uid(2))["native"].to_list() == [dumps(a)]
    assert records.filter(pl.col("uuid") == uid(3))["native"].to_list() == [dumps(b)]

    sl = t["source_lines"].filter(pl.col("line") == 2).sort("sub")
    assert sl["sub"].to_list() == [1, 2]
    assert sl["status"].to_list() == ["recovered", "recovered"]
    assert sl["reason"].to_list() == ["concatenated_objects", "concatenated_objects"]
    assert sl["record_id"].to_list() == [f"{SID}:{uid(2)}", f"{SID}:{uid(3)}"]
    assert t["rejects"].height == 0


def test_texts_after_a_recovered_line_are_those_of_the_line_named(src, out):
    # The objects recovered from a line are decoded after the batch's other lines, so the frame of
    # observations is not in position order: each JSON text a statement names by the observation's
    # position (records.native of the latest line, toolUseResult of the first, source_lines.native
    # of a folded line) is still the text of that line.
    lines = [
        user(uid(1), None, "first"),
        dumps(user(uid(2), uid(1), "second")) + dumps(user(uid(3), uid(2), "third")),
        assistant(uid(4), uid(3), "msg_01R", [THINKING], output=3),
        assistant(uid(5), uid(4), "msg_01R", [tool_use("toolu_01R")], output=5, stop="tool_use"),
        tool_result(uid(6), uid(5), "toolu_01R", "a b", result={"stdout": "a b", "stderr": "", "interrupted": False}),
        user(uid(7), uid(6), "last"),
    ]
    path = write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)

    natives = dict(t["records"].select("position", "native").iter_rows())
    assert natives == {
        "line:1": dumps(lines[0]),
        "line:2#1": dumps(user(uid(2), uid(1), "second")),
        "line:2#2": dumps(user(uid(3), uid(2), "third")),
        "line:3": dumps(lines[3]),  # the response's record: the text of its latest line (4)
        "line:5": dumps(lines[4]),
        "line:6": dumps(lines[5]),
    }
    sl = by_line(t["source_lines"], path.name)
    assert (sl[(3, None)]["status"], sl[(3, None)]["native"]) == ("folded", dumps(lines[2]))
    assert sl[(4, None)]["native"] is None
    call = one(t["tool_calls"].filter(pl.col("call_id") == "toolu_01R"))
    assert json.loads(call["result_native"]) == lines[4]["toolUseResult"]


def test_uncommitted_bytes_after_the_last_newline_are_kept_without_reject_or_loss(src, out):
    # registry entry, Position basis: a commit boundary takes precedence over physical EOF;
    # uncommitted bytes are not a gap
    complete = [user(uid(1), None, "hello"), assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn")]
    cut = dumps(user(uid(3), uid(2), "a prompt being written"))[:57]
    path = write_jsonl(src / f"{SID}.jsonl", [*complete, cut], newline_at_end=False)
    t = run(src, out)

    assert t["rejects"].height == 0
    assert rows(t["losses"], category="rejected_lines").height == 0
    sl = by_line(t["source_lines"], path.name)
    row = sl[(3, None)]
    assert (row["status"], row["reason"], row["record_id"]) == ("uncommitted", "after_last_newline", None)
    assert row["raw"] == cut.encode()
    assert (row["byte_offset"], row["byte_length"]) == (path.read_bytes().rindex(b"\n") + 1, len(cut.encode()))
    assert t["records"]["uuid"].to_list() == [uid(1), uid(2)]
    assert one(t["inferences"])["inference_id"] == "msg_01A"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rejected_lines"] == 0


def test_complete_object_without_a_final_newline_is_committed(src, out):
    # Entire writes every full.jsonl without a final newline
    lines = [user(uid(1), None, "hello"), assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn")]
    path = write_jsonl(src / f"{SID}.jsonl", lines, newline_at_end=False)
    t = run(src, out)
    sl = by_line(t["source_lines"], path.name)
    assert (sl[(2, None)]["status"], sl[(2, None)]["record_id"]) == ("mapped", f"{SID}:msg:msg_01A")
    assert t["rejects"].height == 0
    assert one(t["inferences"])["usage_complete"] is True


def test_a_value_after_the_last_newline_that_is_no_object_is_rejected(src, out):
    # it parses, so it is committed: a reject, not uncommitted bytes
    path = write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello"), "[1, 2]"], newline_at_end=False)
    t = run(src, out)
    assert (one(t["rejects"])["line"], one(t["rejects"])["reason"]) == (2, "not_an_object")
    assert by_line(t["source_lines"], path.name)[(2, None)]["status"] == "rejected"


def test_cut_line_in_the_middle_is_invalid_json_and_the_rest_converts(src, out):
    cut = dumps(user(uid(2), uid(1), "lost"))[:40]
    lines = [user(uid(1), None, "hello"), cut, user(uid(3), uid(1), "after")]
    write_jsonl(src / f"{SID}.jsonl", lines)
    t = run(src, out)
    rej = one(t["rejects"])
    assert (rej["line"], rej["reason"]) == (2, "invalid_json")
    assert rej["raw"] == cut.encode()
    assert t["records"]["uuid"].to_list() == [uid(1), uid(3)]


def _invalid_utf8_line() -> bytes:
    text = dumps(user(uid(2), uid(1), "caf\u00e9 MARK"))
    return text.encode().replace(b"MARK", b"\xff\xfe")


def test_invalid_utf8_line_is_converted_with_replacement_and_raw_bytes(src, out):
    bad = _invalid_utf8_line()
    path = write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello"), bad, user(uid(3), uid(2), "end")])
    t = run(src, out)

    rec = one(t["records"].filter(pl.col("uuid") == uid(2)))
    assert rec["position"] == "line:2"
    assert "\ufffd" in json.loads(rec["native"])["message"]["content"]
    rows = by_line(t["source_lines"], path.name)
    sl = rows[(2, None)]
    assert sl["status"] == "mapped"
    assert "invalid_utf8_replaced" in sl["reason"]
    assert sl["record_id"] == rec["record_id"]
    assert sl["byte_length"] == len(bad)
    assert sl["raw"] == bad
    assert rows[(1, None)]["raw"] is None  # valid lines are not copied
    assert t["rejects"].height == 0
    assert t["records"].height == 3


def test_empty_file_is_reported_empty_and_adds_no_rows(src, out):
    (src / f"{SID2}.jsonl").write_bytes(b"")
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    t = run(src, out)
    manifest = json.loads((out / "manifest.json").read_text())
    inputs = {i["path"]: i for i in manifest["inputs"]}
    empty = inputs[f"{src.name}/{SID2}.jsonl"]
    assert (empty["status"], empty["size"], empty["lines"]) == ("empty", 0, 0)
    assert inputs[f"{src.name}/{SID}.jsonl"]["status"] == "converted"
    for name in ("records", "parts", "source_lines", "inference_observations", "tool_calls"):
        assert t[name].filter(pl.col("session_key") == SID2).height == 0, name
    assert t["rejects"].height == 0
    assert t["records"].height == 1


def test_files_read_together_keep_their_own_lines_offsets_and_digests(src, out):
    # One batch reads its files into one buffer: a file without a final newline must not run
    # into the next one, and line numbers and byte offsets restart in each file.
    first = (json.dumps(user(uid(1), None, "a")) + "\n" + json.dumps(user(uid(2), uid(1), "b"))).encode()
    second = (json.dumps(user(uid(3), None, "c", sid=SID2)) + "\n\n" + json.dumps(user(uid(4), uid(3), "dd", sid=SID2)) + "\n").encode()
    (src / f"{SID}.jsonl").write_bytes(first)
    (src / "empty.jsonl").write_bytes(b"")
    (src / f"{SID2}.jsonl").write_bytes(second)
    t = run(src, out)
    lines = t["source_lines"].sort("source_file", "line")
    for data, sid in ((first, SID), (second, SID2)):
        rows = lines.filter(pl.col("source_file") == f"{src.name}/{sid}.jsonl")
        offsets, start = [], 0
        for raw in data.split(b"\n"):
            offsets.append(start)
            start += len(raw) + 1
        expected = [(n + 1, offsets[n], len(raw)) for n, raw in enumerate(data.split(b"\n")) if raw.strip()]
        assert rows.select("line", "byte_offset", "byte_length").rows() == expected
    assert t["rejects"].height == 0  # the last line of the first file is whole JSON, not truncated
    manifest = json.loads((out / "manifest.json").read_text())
    digests = {i["path"]: i["sha256"] for i in manifest["inputs"]}
    assert digests[f"{src.name}/{SID}.jsonl"] == hashlib.sha256(first).hexdigest()
    assert digests[f"{src.name}/{SID2}.jsonl"] == hashlib.sha256(second).hexdigest()
    assert digests[f"{src.name}/empty.jsonl"] == hashlib.sha256(b"").hexdigest()


def test_empty_file_opens_no_session(src, out):
    # A 0-byte file holds no stream: no sessions row (with record_count 0) and no per-stream losses.
    (src / f"{SID2}.jsonl").write_bytes(b"")
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    t = run(src, out)
    assert t["sessions"]["session_key"].to_list() == [SID]
    assert t["losses"].filter(pl.col("session_key") == SID2).height == 0


def test_pretty_printed_json_document_is_one_foreign_file(src, out):
    doc = json.dumps({"version": 1, "originalPath": "/home/user/project",
                      "entries": [{"sessionId": SID, "messageCount": 2}, {"sessionId": SID2}]}, indent=2)
    foreign = src / "sessions-index.jsonl"
    foreign.write_text(doc + "\n")
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello"),
                                       assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn")])
    t = run(src, out)

    rej = one(t["rejects"])
    assert rej["reason"] == "foreign_file"
    assert rej["source_file"] == file_name(src, foreign)
    assert rej["line"] is None
    sl = t["source_lines"].filter(pl.col("source_file") == file_name(src, foreign))
    assert sl.height == len([x for x in doc.splitlines() if x.strip()])
    assert set(sl["status"].to_list()) == {"foreign"}
    assert sl["record_id"].null_count() == sl.height

    assert t["records"].height == 2
    assert one(t["inferences"])["inference_id"] == "msg_01A"
    assert t["sessions"]["session_key"].to_list() == [SID]
    manifest = json.loads((out / "manifest.json").read_text())
    status = {i["path"]: i["status"] for i in manifest["inputs"]}
    assert status[file_name(src, foreign)] == "foreign"
    assert (manifest["foreign_files"], manifest["rejected_lines"]) == (1, 0)


# ---------------------------------------------------------------------------------------------
# 9. Nothing lost
# ---------------------------------------------------------------------------------------------


def _messy(src: Path) -> list[Path]:
    prompt = user(uid(1), None, "start")
    main = [
        {"type": "permission-mode", "permissionMode": "acceptEdits", "sessionId": SID},
        prompt,
        "",
        assistant(uid(2), uid(1), "msg_01M", [THINKING], output=3),
        assistant(uid(3), uid(2), "msg_01M", [tool_use("toolu_01A")], output=3),
        "   ",
        tool_result(uid(4), uid(3), "toolu_01A", "done"),
        assistant(uid(5), uid(4), "msg_01M", [TEXT], output=77, stop="end_turn"),
        prompt,  # identical copy
        user(uid(6), uid(5), "v1"),
        dumps(user(uid(7), uid(6), "x")) + dumps({"type": "last-prompt", "lastPrompt": "x", "sessionId": SID}),
        '{"type": "user", "message": ',  # cut mid-file
        "[1, 2, 3]",  # not an object
        _invalid_utf8_line(),
        user(uid(6), uid(5), "v2"),  # overwritten snapshot of line 10
        {"type": "summary", "summary": "Messy", "leafUuid": uid(6)},
        {"type": "file-history-snapshot", "messageId": uid(6), "snapshot": {"trackedFileBackups": {}},
         "isSnapshotUpdate": False},
        {"type": "some-future-type", "payload": {"x": 1}},
        dumps(user(uid(8), uid(6), "tail"))[:30],
    ]
    files = [write_jsonl(src / f"{SID}.jsonl", main, newline_at_end=False)]
    files.append(write_jsonl(src / f"{SID2}.jsonl", [
        user(uid(20), None, "other", sid=SID2),
        assistant(uid(21), uid(20), "msg_01M", [THINKING], output=3, sid=SID2),  # resume copy
    ]))
    (src / "empty.jsonl").write_bytes(b"")
    pretty = src / "notes.jsonl"
    pretty.write_text(json.dumps({"a": [1, 2], "b": {"c": None}}, indent=2) + "\n")
    files.append(pretty)
    return files


def _objects_back_to_back(text: str) -> int:
    """How many JSON objects a line holds back to back (`{...}{...}`); 0 when it is anything else."""
    decoder, i, n = json.JSONDecoder(), 0, 0
    while i < len(text):
        try:
            obj, i = decoder.raw_decode(text, i)
        except ValueError:
            return 0
        if not isinstance(obj, dict):
            return 0
        n += 1
        while i < len(text) and text[i] in " \t\r":
            i += 1
    return n


def _expected_source_line_rows(path: Path) -> int:
    data = path.read_bytes()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines = lines[:-1]
    n = 0
    for raw in lines:
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            continue
        n += max(1, _objects_back_to_back(text))
    return n


def test_nothing_lost_on_a_messy_archive(src, out):
    files = _messy(src)
    t = run(src, out)
    sl = t["source_lines"]
    records = t["records"]

    assert sl.height == sum(_expected_source_line_rows(p) for p in files)
    for p in files:
        assert sl.filter(pl.col("source_file") == file_name(src, p)).height == _expected_source_line_rows(p), p
    assert set(sl["status"].unique().to_list()) == STATUSES  # the fixture exercises every status
    assert {"identical_copy", "overwritten_snapshot", "concatenated_objects"} <= set(sl["reason"].to_list())
    assert sl.select("source_file", "line", "sub").is_duplicated().sum() == 0

    kept = sl.filter(~pl.col("status").is_in(["rejected", "uncommitted", "foreign"]))
    assert kept["record_id"].null_count() == 0
    assert set(kept["record_id"].to_list()) <= set(records["record_id"].to_list())
    assert set(records["record_id"].to_list()) <= set(kept["record_id"].to_list())
    assert records["record_id"].is_unique().all()
    assert records.select("session_key", "seq").is_duplicated().sum() == 0

    dropped = sl.filter(pl.col("status").is_in(["rejected", "uncommitted", "foreign"]))
    assert dropped["record_id"].null_count() == dropped.height
    rejected = sl.filter(pl.col("status") == "rejected")
    rejects = t["rejects"].filter(pl.col("reason") != "foreign_file")
    assert sorted(rejected["line"].to_list()) == sorted(rejects["line"].to_list())
    assert set(rejects["reason"].to_list()) == {"invalid_json", "not_an_object"}
    # the cut line at the end is uncommitted: kept, neither rejected nor declared lost
    assert sl.filter(pl.col("status") == "uncommitted")["line"].to_list() == [19]
    assert rows(t["losses"], category="rejected_lines")["count"].to_list() == [2]  # the cut line and [1, 2, 3]
    assert t["rejects"].filter(pl.col("reason") == "foreign_file").height == 1

    assert t["parts"]["record_id"].is_in(records["record_id"].implode()).all()
    assert t["inferences"]["inference_id"].is_unique().all()
    counts = json.loads((out / "manifest.json").read_text())["tables"]
    assert counts == {name: t[name].height for name in counts}


# ---------------------------------------------------------------------------------------------
# 10. Determinism
# ---------------------------------------------------------------------------------------------


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    df = timeless(df)  # when each run read its sources is the one value that depends on the run
    keys = [c for c, dt in df.schema.items() if not isinstance(dt, pl.List)]
    return df.sort(keys, nulls_last=True)


def _subagent_tree(src: Path) -> None:
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "explore the repo"),
        assistant(uid(2), uid(1), "msg_01P", [tool_use("toolu_X", name="Task", cmd="x")], output=50,
                  stop="tool_use"),
        tool_result(uid(3), uid(2), "toolu_X", "found it",
                    result={"status": "completed", "prompt": "explore", "agentId": "a1b2c3d",
                            "content": [{"type": "text", "text": "found it"}], "totalTokens": 999,
                            "usage": {"input_tokens": 1, "output_tokens": 999}}),
    ])
    agent = src / SID / "subagents" / "agent-a1b2c3d.jsonl"
    write_jsonl(agent, [
        user(uid(30), None, "explore", isSidechain=True, agentId="a1b2c3d"),
        assistant(uid(31), uid(30), "msg_01Sub", [TEXT], output=4, isSidechain=True, agentId="a1b2c3d"),
        assistant(uid(32), uid(31), "msg_01Sub", [tool_use("toolu_S", name="Glob")], output=60,
                  stop="tool_use", isSidechain=True, agentId="a1b2c3d"),
    ])
    (agent.parent / "agent-a1b2c3d.meta.json").write_text(
        json.dumps({"agentType": "Explore", "description": "Explore the repo", "toolUseId": "toolu_X"}))


def test_conversion_is_deterministic_across_runs_batch_sizes_and_workers(src, tmp_path):
    _messy(src)
    _subagent_tree(src)
    # resume copy of msg_01P in another session, so usage selection spans batches
    write_jsonl(src / "33333333-3333-4333-8333-333333333333.jsonl", [
        assistant(uid(40), None, "msg_01P", [tool_use("toolu_X", name="Task", cmd="x")], output=3,
                  sid="33333333-3333-4333-8333-333333333333"),
    ])
    # a batch as large as the largest session group: several batches, none larger than the limit
    largest = max(_group_sizes(src).values())
    a = run(src, tmp_path / "a")
    b = run(src, tmp_path / "b")
    c = run(src, tmp_path / "c", batch_bytes=largest, workers=1)
    d = run(src, tmp_path / "d", batch_bytes=largest, workers=3)
    # every session group larger than the limit: one batch each, converted one at a time
    e = run(src, tmp_path / "e", batch_bytes=1, workers=3)
    # really several batches
    assert len(list((tmp_path / "c" / "records").glob("*.parquet"))) >= 2
    assert len(list((tmp_path / "e" / "records").glob("*.parquet"))) > 2
    for name in ("sessions", "records", "parts", "inference_observations", "inferences", "tool_calls",
                 "lineage", "source_lines", "rejects", "losses"):
        assert a[name].height > 0, name  # the fixture exercises the core tables
    for name in (t.name for t in TABLES):
        assert_frame_equal(_sorted(a[name]), _sorted(b[name]), check_row_order=True)
        assert_frame_equal(_sorted(a[name]), _sorted(c[name]), check_row_order=True)
        assert_frame_equal(_sorted(a[name]), _sorted(e[name]), check_row_order=True)
        # batches converted at once write the same part files, row for row
        assert_frame_equal(timeless(c[name]), timeless(d[name]), check_row_order=True)
    # the same manifests but for the part files (named by batch; `sessions` holds when each run ran)
    manifests = [json.loads((tmp_path / x / "manifest.json").read_text()) for x in "acde"]
    for m in manifests:
        m.pop("files")
    assert all(m == manifests[0] for m in manifests)


def _group_sizes(src: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for f in discover([src]).files:
        sizes[group_owner(f)] = sizes.get(group_owner(f), 0) + f.size
    return sizes


def test_a_session_larger_than_a_batch_is_converted_alone_after_a_warning(src, out, monkeypatch):
    # four sessions; the second holds more than a batch, the others one batch each
    sids = [f"{n}{n}{n}{n}{n}{n}{n}{n}-0000-4000-8000-000000000000" for n in range(1, 5)]
    for n, sid in enumerate(sids):
        text = "x" * (300_000 if n == 1 else 30_000)
        write_jsonl(src / f"{sid}.jsonl", [user(uid(n), None, text, sid=sid)])
    running: set[int] = set()
    overlaps: dict[int, set[int]] = {}
    threads: dict[int, int] = {}
    lock = threading.Condition()
    partner = {2: 3, 3: 2}  # the two batches after the large one run together
    real = batch.run.task.convert_batch

    # a batch's parts are named by its session groups: here one session per batch, in this order
    batch_of = {part_id([sid]): n for n, sid in enumerate(sids)}

    def tracked(files, output, part, tool_results, hasher, workers, stop, *rest):
        index = batch_of[part]
        with lock:
            overlaps[index] = set(running)
            for other in running:
                overlaps[other].add(index)
            running.add(index)
            lock.notify_all()
            # a batch expected beside another waits until it has seen it start (or gives up after a
            # generous minute: the assertions below then fail), instead of a sleep that must be long enough
            if index in partner:
                lock.wait_for(lambda: partner[index] in overlaps, timeout=60)
        threads[index] = workers
        try:
            return real(files, output, part, tool_results, hasher, workers, stop, *rest)
        finally:
            with lock:
                running.discard(index)

    monkeypatch.setattr(batch.run.task, "convert_batch", tracked)
    warnings: list[str] = []
    batch.convert([src], out, batch_bytes=50_000, workers=2, warn=warnings.append)

    assert len(warnings) == 1
    assert sids[1] in warnings[0] and "1 session holds more than the batch size" in warnings[0]
    assert sorted(overlaps) == [0, 1, 2, 3]
    assert overlaps[1] == set()  # nothing ran beside the large session
    assert threads[1] == 1  # ... and its DuckDB connection had every CPU
    assert overlaps[2] == {3}  # the batches after it ran two at once again
    assert pl.read_parquet(out / "records" / "*.parquet").height == 4


def test_arrow_allocates_from_jemalloc_or_the_system_unless_told(src, out, monkeypatch):
    # pyarrow's default pool (mimalloc) kept each worker's pages: the conversion sets another, and
    # leaves the one ARROW_DEFAULT_MEMORY_POOL names
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    previous = pa.default_memory_pool()
    try:
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
        batch.convert([src], out)
        assert pa.default_memory_pool().backend_name == "mimalloc"
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
        batch.convert([src], out)
        assert pa.default_memory_pool().backend_name in ("jemalloc", "system")
    finally:
        pa.set_memory_pool(previous)


# ---------------------------------------------------------------------------------------------
# 11. Subagents
# ---------------------------------------------------------------------------------------------


def test_nested_subagent_is_linked_to_the_spawning_call(src, out):
    _subagent_tree(src)
    t = run(src, out)
    child = f"{SID}/a1b2c3d"

    sessions = {r["session_key"]: r for r in t["sessions"].iter_rows(named=True)}
    assert set(sessions) == {SID, child}
    sub = sessions[child]
    assert sub["stream_kind"] == "subagent"
    assert sub["session_id"] == "a1b2c3d"
    assert sub["agent_id"] == "a1b2c3d"
    assert sub["parent_session_key"] == SID
    assert sub["agent_type"] == "Explore"
    assert sub["description"] == "Explore the repo"
    assert sessions[SID]["parent_session_key"] is None

    edge = one(t["lineage"])
    assert edge["session_key"] == child
    assert edge["relation"] == "spawned_by"
    assert edge["parent_session_key"] == SID
    assert edge["call_id"] == "toolu_X"
    assert edge["call_record_id"] == f"{SID}:msg:msg_01P"
    assert edge["scope"] == "subagent"
    assert edge["role"] == "Explore"
    assert edge["evidence"] == "native_field"
    assert "sidecar.toolUseId" in edge["evidence_detail"]
    assert "tool_result.agentId" in edge["evidence_detail"]
    assert t["losses"].filter(pl.col("category") == "lineage").height == 0

    # toolUseResult.usage duplicates the subagent's own usage: never an inference
    assert sorted(t["inferences"]["inference_id"].to_list()) == ["msg_01P", "msg_01Sub"]
    sub_inf = one(t["inferences"].filter(pl.col("inference_id") == "msg_01Sub"))
    assert (sub_inf["session_key"], sub_inf["output_total_tokens"]) == (child, 60)
    assert set(t["records"].filter(pl.col("session_key") == child)["uuid"].to_list()) == {uid(30), uid(31)}


def test_subagent_without_sidecar_links_through_the_tool_result(src, out):
    # Only the parent's tool result names the agent (no sidecar): the edge still holds.
    _subagent_tree(src)
    (src / SID / "subagents" / "agent-a1b2c3d.meta.json").unlink()
    t = run(src, out)
    edge = one(t["lineage"])
    assert (edge["parent_session_key"], edge["call_id"]) == (SID, "toolu_X")
    assert edge["evidence_detail"] == "tool_result.agentId"


# ---------------------------------------------------------------------------------------------
# 12. Output atomicity
# ---------------------------------------------------------------------------------------------


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.mark.parametrize(
    ("exc", "match"), [(RuntimeError("boom"), "boom"), (KeyboardInterrupt(), None)], ids=["error", "interrupt"]
)
def test_failed_conversion_leaves_previous_output_intact(src, out, monkeypatch, exc, match):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    run(src, out)
    before = read_tables(out)
    manifest = (out / "manifest.json").read_bytes()
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))

    write_jsonl(src / f"{SID2}.jsonl", [user(uid(2), None, "more", sid=SID2)])

    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(batch.run.finalize, "finalize", boom)
    with pytest.raises(type(exc), match=match):
        batch.convert([src], out)

    assert (out / "manifest.json").read_bytes() == manifest
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == files
    after = read_tables(out)
    for name, df in before.items():
        assert_frame_equal(df, after[name])
    assert _leftovers(out) == []


def test_failure_in_a_batch_step_leaves_no_temp_folder(src, out, monkeypatch):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])

    def boom(*args, **kwargs):
        raise RuntimeError("a step failed")

    monkeypatch.setattr(batch.formats.claude_code.converter, "_narrow", boom)
    with pytest.raises(RuntimeError, match="a step failed"):
        batch.convert([src], out)
    assert not out.exists()
    assert _leftovers(out) == []


def test_failure_in_one_of_concurrent_batches_stops_the_run_and_leaves_nothing(src, out, monkeypatch):
    for n, sid in enumerate((SID, SID2, "33333333-3333-4333-8333-333333333333")):
        write_jsonl(src / f"{sid}.jsonl", [user(uid(n), None, "hello", sid=sid)])
    real = batch.formats.claude_code.converter._narrow

    def fail_on_second(con, failed, files_frame):
        if SID2 in files_frame.get_column("session_key").to_list():
            raise RuntimeError("a step failed")
        return real(con, failed, files_frame)

    monkeypatch.setattr(batch.formats.claude_code.converter, "_narrow", fail_on_second)
    with pytest.raises(RuntimeError, match="a step failed"):
        batch.convert([src], out, batch_bytes=1, workers=2)
    assert not out.exists()
    assert _leftovers(out) == []


def test_non_empty_folder_without_manifest_is_refused(src, tmp_path):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    target = tmp_path / "my-documents"
    target.mkdir()
    (target / "thesis.txt").write_text("do not delete")
    with pytest.raises(OutputError, match="not an asr-batch output"):
        batch.convert([src], target)
    assert [p.name for p in target.iterdir()] == ["thesis.txt"]
    assert (target / "thesis.txt").read_text() == "do not delete"
    assert _leftovers(target) == []


def test_a_folder_without_transcripts_is_an_error_that_says_what_was_looked_for(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "notes.txt").write_text("not a transcript")
    with pytest.raises(SourceError, match=r"no transcripts found in .*src \(1 other files"):
        batch.convert([tmp_path / "src"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
