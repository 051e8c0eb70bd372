"""Entire agent-protocol lifecycle events (--entire-events): authored event files, the tables they give.

No real file of events exists: Entire hands an event from `parse-hook` to its own state machine and
stores none. The lines are written after the Event of the reference (§3 "External agent protocol":
type 1..7, session_id, previous_session_id, prompt, model, timestamp, tool_use_id, subagent_id,
subagent_type, task_description, metadata), so they show the mapping, not a writer's output.
"""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import batch
from batch.cli import main
from batch.formats import entire_events
from batch.sources.events import find
from batch.transforms import tail
from conftest import SID, SID2, TEXT, assert_same_as_full, assert_tables_equal, assistant, one, rows, uid, user
from entire_repos import commit, init, meta, root_meta

SID3 = "33333333-3333-4333-8333-333333333333"
EVENTS = "hooks/events.jsonl"


def ts(second: int, minute: int = 30) -> str:
    return f"2026-02-12T20:{minute:02d}:{second:02d}Z"


def at(second: int, minute: int = 30) -> datetime:
    return datetime(2026, 2, 12, 20, minute, second, tzinfo=timezone.utc)


# One line per entry, in file order; a str is written as it is (a malformed line).
LINES = [
    {"type": 1, "session_id": SID, "session_ref": "sessions/s.jsonl", "model": "claude-opus-4-6", "timestamp": ts(0, 29)},  # 1
    {"type": 2, "session_id": SID, "prompt": "hi", "timestamp": ts(0)},  # 2
    {"type": 6, "session_id": SID, "tool_use_id": "toolu_01S", "subagent_type": "Explore",
     "task_description": "look around", "tool_input": {"prompt": "look"}, "timestamp": ts(2)},  # 3
    "{not json",  # 4: malformed
    {"type": 7, "session_id": SID, "tool_use_id": "toolu_01S", "subagent_id": "ag1",
     "response_message": "done", "timestamp": ts(3)},  # 5
    {"type": 4, "session_id": SID, "timestamp": ts(4)},  # 6
    {"type": 3, "session_id": SID, "metadata": {"k": "v"}, "timestamp": ts(5)},  # 7
    {"type": 3, "session_id": SID, "timestamp": ts(6)},  # 8: idle again, no change
    {"type": 2, "session_id": SID, "prompt": "more", "timestamp": ts(7)},  # 9
    {"type": 5, "session_id": SID, "timestamp": ts(8)},  # 10
    {"type": 1, "session_id": SID2, "previous_session_id": SID, "timestamp": ts(0, 40)},  # 11
    {"type": 12, "session_id": SID2, "timestamp": ts(1, 40)},  # 12: unknown type
    {"type": "message", "session_id": SID2, "id": "m1"},  # 13: an append-only record: not read
    [1, 2],  # 14: not an object
    {"type": 3, "timestamp": ts(2, 40)},  # 15: no session_id
    {"type": 5, "session_id": SID2, "timestamp": ts(3, 40)},  # 16
]


def write_lines(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")


def transcript(folder) -> None:
    """A Claude Code session SID of two lines (user, assistant) at 20:30:00 and 20:30:01."""
    write_lines(folder / "proj" / f"{SID}.jsonl",
                [user(uid(1), None, "hi"), assistant(uid(2), uid(1), "msg_01", [TEXT], stop="end_turn")])


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    base = tmp_path_factory.mktemp("events")
    transcript(base / "src")
    write_lines(base / EVENTS, LINES)
    out = base / "out"
    result = batch.convert([base / "src"], out, entire_events=[base / "hooks"])
    return result, out


def table(out, name: str) -> pl.DataFrame:
    return pl.read_parquet(out / name / "*.parquet")


def rid(session: str, line: int) -> str:
    return f"{session}:events:{EVENTS}:line:{line}"


def test_each_event_type_is_a_record_after_the_transcript_of_its_session(converted):
    _, out = converted
    records = table(out, "records").sort("session_key", "seq")
    got = rows(records, session_key=SID).select("seq", "kind", "position", "native_type", "record_source", "author")
    assert got.rows() == [
        (1, "message", "line:1", "user", "transcript", None),
        (2, "message", "line:2", "assistant", "transcript", "model"),
        # the events file's own positions, after the transcript's records (the snapshot tail)
        (3, "session_info", "events:line:1", "SessionStart", "entire_events", "harness"),
        (4, "session_info", "events:line:2", "TurnStart", "entire_events", "harness"),
        (5, "subagent", "events:line:3", "SubagentStart", "entire_events", "harness"),
        (6, "subagent", "events:line:5", "SubagentEnd", "entire_events", "harness"),
        (7, "io.entire/compaction", "events:line:6", "Compaction", "entire_events", "harness"),
        (8, "session_info", "events:line:7", "TurnEnd", "entire_events", "harness"),
        (9, "session_info", "events:line:8", "TurnEnd", "entire_events", "harness"),
        (10, "session_info", "events:line:9", "TurnStart", "entire_events", "harness"),
        (11, "session_info", "events:line:10", "SessionEnd", "entire_events", "harness"),
    ]
    start = one(records, record_id=rid(SID, 1))
    assert (start["timestamp"], start["model"], start["source_file"], start["source_line"]) == (
        at(0, 29), "claude-opus-4-6", EVENTS, 1)
    # every field of the event stays in native
    assert json.loads(one(records, record_id=rid(SID, 3))["native"]) == LINES[2]
    assert json.loads(one(records, record_id=rid(SID, 7))["native"])["metadata"] == {"k": "v"}


def test_unknown_event_type_is_kept_as_unknown(converted):
    _, out = converted
    got = rows(table(out, "records"), session_key=SID2).sort("seq")
    assert got.select("seq", "kind", "native_type", "position").rows() == [
        (1, "session_info", "SessionStart", "events:line:11"),
        (2, "unknown", "12", "events:line:12"),
        (3, "session_info", "SessionEnd", "events:line:16"),
    ]
    assert json.loads(got.row(1, named=True)["native"]) == LINES[11]


def test_events_join_the_transcript_session_and_session_start_sets_started_at(converted):
    _, out = converted
    sessions = table(out, "sessions")
    assert sorted(sessions.get_column("session_key")) == [SID, SID2]  # no second row for SID
    s = one(sessions, session_key=SID)
    assert (s["producer_method"], s["producer_source"], s["agent"]) == ("converter", "claude-code-jsonl", "claude-code")
    # SessionStart at 20:29:00 sets started_at, before the first transcript line (20:30:00)
    assert s["started_at"] == at(0, 29)
    assert s["ended_at"] == at(8)  # SessionEnd, the latest record
    assert (s["record_count"], s["line_count"]) == (2 + 9, 2 + 9)
    assert s["source_files"] == [f"src/proj/{SID}.jsonl", EVENTS]
    only = one(sessions, session_key=SID2)  # a session known from events alone
    assert (only["producer_method"], only["producer_source"], only["stream_kind"], only["agent"]) == (
        "import", "entire-agent-events", "main", None)
    assert (only["started_at"], only["ended_at"], only["record_count"]) == (at(0, 40), at(3, 40), 3)
    # lines 11, 12, 13 and 16 name SID2 (13 is rejected: an append-only record)
    assert (only["line_count"], only["source_files"]) == (4, [EVENTS])


def test_turns_and_session_end_are_state_changes(converted):
    _, out = converted
    events = table(out, "session_events").filter(pl.col("field") == "state").sort("session_key", "seq")
    assert events.select("session_key", "seq", "event_kind", "value", "previous_value", "native_type", "record_id").rows() == [
        (SID, 4, "session_info", "running", None, "TurnStart", rid(SID, 2)),
        (SID, 8, "session_info", "idle", "running", "TurnEnd", rid(SID, 7)),
        # line 8 repeats idle: no change
        (SID, 10, "session_info", "running", "idle", "TurnStart", rid(SID, 9)),
        (SID, 11, "session_info", "ended", "running", "SessionEnd", rid(SID, 10)),
        (SID2, 3, "session_info", "ended", None, "SessionEnd", rid(SID2, 16)),
    ]


def test_previous_session_id_is_lineage_continues(converted):
    _, out = converted
    lineage = table(out, "lineage")
    assert lineage.select(
        "session_key", "relation", "parent_session_key", "call_id", "scope", "evidence", "evidence_detail", "reason"
    ).rows() == [(SID2, "continues", SID, None, "main", "native_field", "entire.previous_session_id", "other")]


def test_compaction_alone_is_audit_only(converted):
    _, out = converted
    assert table(out, "compactions").height == 0
    assert table(out, "records").filter(pl.col("kind") == "compaction").height == 0


def test_every_line_is_accounted_for(converted):
    result, out = converted
    lines = table(out, "source_lines").filter(pl.col("source_file") == EVENTS).sort("line")
    assert lines.height == len(LINES)
    assert lines.select("line", "status", "reason", "session_key").filter(pl.col("status") != "mapped").rows() == [
        (4, "rejected", "invalid_json", None),
        (13, "rejected", "not_an_event", SID2),
        (14, "rejected", "not_an_object", None),
        (15, "rejected", "missing_session_id", None),
    ]
    mapped = lines.filter(pl.col("status") == "mapped")
    assert mapped.get_column("record_id").to_list() == [
        rid(SID if n <= 10 else SID2, n) for n in (1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 16)
    ]
    rejects = table(out, "rejects").filter(pl.col("source_file") == EVENTS).sort("line")
    assert rejects.select("line", "reason").rows() == [
        (4, "invalid_json"), (13, "not_an_event"), (14, "not_an_object"), (15, "missing_session_id")]
    assert rejects.get_column("raw").to_list()[0] == b"{not json"
    assert "type is varchar, not an integer" in rejects.row(1, named=True)["detail"]
    (entry,) = [i for i in result.manifest["inputs"].parse() if i["path"] == EVENTS]
    assert (entry["lines"], entry["status"], entry["format"], entry["session_key"]) == (
        16, "converted", "entire-agent-events", SID)


def test_a_session_split_from_its_transcript_by_batch_size_still_joins(converted, tmp_path):
    _, out = converted
    transcript(tmp_path / "src")
    write_lines(tmp_path / EVENTS, LINES)
    small = batch.convert([tmp_path / "src"], tmp_path / "out", entire_events=[tmp_path / "hooks"], batch_bytes=1)
    for name in ("records", "session_events", "source_lines", "lineage"):
        key = [c for c in ("source_file", "line", "record_id", "session_key", "field", "seq") if c in table(out, name).columns]
        assert table(tmp_path / "out", name).sort(key, nulls_last=True).equals(table(out, name).sort(key, nulls_last=True))
    assert small.tables["sessions"] == 2
    # the file is one input, though its sessions were read in two batches
    assert [i["path"] for i in small.manifest["inputs"].parse()].count(EVENTS) == 1


def test_a_claude_code_transcript_is_never_read_as_events(tmp_path):
    transcript(tmp_path / "src")
    result = batch.convert([], tmp_path / "out", entire_events=[tmp_path / "src"])
    out = tmp_path / "out"
    assert table(out, "records").height == 0
    assert table(out, "source_lines").get_column("status").to_list() == ["foreign", "foreign"]
    (reject,) = table(out, "rejects").rows(named=True)
    assert (reject["reason"], reject["line"]) == ("foreign_file", None)
    assert "not with --entire-events" in reject["detail"]
    assert result.manifest["inputs"].parse()[0]["status"] == "foreign"


def test_an_events_file_passed_as_a_source_is_not_read_as_events(tmp_path):
    write_lines(tmp_path / EVENTS, LINES[:3])
    batch.convert([tmp_path / "hooks"], tmp_path / "out")
    # the Claude Code converter keeps each line as a record of an unknown type; no lifecycle mapping
    records = table(tmp_path / "out", "records")
    assert records.select("kind", "record_source").unique().rows() == [("unknown", "transcript")]
    assert table(tmp_path / "out", "session_events").height == 0


def test_cli_option_and_a_missing_path_is_one_error_line(capsys, tmp_path):
    write_lines(tmp_path / EVENTS, LINES[10:12])
    with pytest.raises(SystemExit) as exit_:
        main(["convert", "--entire-events", str(tmp_path / "hooks"), "--out", str(tmp_path / "out"), "-q"])
    assert exit_.value.code == 0
    assert sorted(table(tmp_path / "out", "sessions").get_column("session_key")) == [SID2]
    with pytest.raises(SystemExit) as exit_:
        main(["convert", "--entire-events", str(tmp_path / "absent"), "--out", str(tmp_path / "out2")])
    err = capsys.readouterr().err
    assert exit_.value.code == 1
    assert not (tmp_path / "out2").exists()
    assert err.startswith("Error: --entire-events ") and "no such file or folder" in err
    assert len(err.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_:
        main(["convert", "--entire-events", str(tmp_path / "empty"), "--out", str(tmp_path / "out3")])
    err = capsys.readouterr().err
    assert exit_.value.code == 1
    assert err.startswith("Error: --entire-events ") and "no .jsonl file in this folder" in err
    assert len(err.strip().splitlines()) == 1


def test_tail_numbers_records_without_seq_after_their_stream():
    def records(keys, seqs, lines):
        return pl.DataFrame({"record_id": [f"{k}:{n}" for k, n in zip(keys, lines)], "session_key": keys,
                             "seq": pl.Series(seqs, dtype=pl.Int64), "source_file": ["f"] * len(keys),
                             "source_line": lines})
    # the pieces pass as a batch hands them over: the rows with a seq go on at once, the others wait
    numbered = tail.Tail()
    passed = [
        numbered.pass_on("records", records(["a", "a"], [1, 2], [1, 2])),
        numbered.pass_on("records", records(["a", "c", "a"], [None, None, None], [9, 1, 3])),
        numbered.pass_on("session_events", pl.DataFrame({"record_id": ["a:9", "a:2"], "seq": pl.Series([None, 2], dtype=pl.Int64)})),
        numbered.pass_on("records", records(["b", "a"], [1, None], [1, 4])),
    ]
    assert [None if p is None else p.height for p in passed] == [2, 0, None, 1]
    held = numbered.rest()
    got = pl.concat([p for p in passed[:2] + passed[3:]] + [held["records"]]).sort("record_id").select("record_id", "seq")
    assert got.rows() == [("a:1", 1), ("a:2", 2), ("a:3", 3), ("a:4", 4), ("a:9", 5), ("b:1", 1), ("c:1", 1)]
    assert held["session_events"].rows() == [("a:9", 5), ("a:2", 2)]
    assert numbered.rest() == {}


def test_events_join_a_session_of_an_entire_checkpoint(tmp_path):
    repo = init(tmp_path / "repo")
    full = "\n".join(json.dumps(x) for x in [
        user(uid(1), None, "hi", sid=SID3),
        assistant(uid(2), uid(1), "msg_09", [TEXT], stop="end_turn", sid=SID3),
    ]).encode() + b"\n"
    base = "c0/ffee000009"
    commit(repo, "refs/heads/entire/checkpoints/v1", {
        f"{base}/metadata.json": root_meta("c0ffee000009", ["0"], base=base),
        f"{base}/0/metadata.json": meta(session_id=SID3, checkpoint_id="c0ffee000009", agent="Claude Code",
                                        created_at="2026-02-12T20:31:00Z"),
        f"{base}/0/full.jsonl": full,
    }, "Checkpoint: c0ffee000009")
    write_lines(tmp_path / EVENTS, [
        {"type": 1, "session_id": SID3, "timestamp": ts(0, 29)},
        {"type": 2, "session_id": SID3, "prompt": "hi", "timestamp": ts(0)},
    ])
    batch.convert([repo], tmp_path / "out", entire_events=[tmp_path / EVENTS])
    out = tmp_path / "out"
    s = one(table(out, "sessions"), session_key=SID3)
    assert table(out, "sessions").height == 1
    assert (s["producer_source"], s["content_level"], json.loads(s["meta"])) == (
        "claude-code-jsonl", "redacted", {"io.entire/checkpoint": "c0ffee000009"})
    assert (s["started_at"], s["record_count"], s["source_files"]) == (
        at(0, 29), 4, ["repo/c0ffee000009/0/full.jsonl", "events.jsonl"])
    assert table(out, "records").sort("seq").select("seq", "position").rows() == [
        (1, "line:1"), (2, "line:2"), (3, "events:line:1"), (4, "events:line:2")]
    assert one(table(out, "session_events"), field="state")["seq"] == 4


def test_a_folder_of_events_reads_its_jsonl_files_and_lists_the_others(tmp_path):
    write_lines(tmp_path / "hooks" / "b.jsonl", LINES[10:11])
    write_lines(tmp_path / "hooks" / "a" / "c.jsonl", LINES[15:16])
    (tmp_path / "hooks" / "notes.txt").write_text("not events")
    found = find([tmp_path / "hooks", tmp_path / "hooks"])  # one folder named twice is read once
    assert [shown for _, shown in found.files] == ["hooks/a/c.jsonl", "hooks/b.jsonl"]
    assert found.skipped == [("hooks/notes.txt", "not a .jsonl file of Entire events")]


JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
    st.text(max_size=8), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    line=st.integers(min_value=0, max_value=len(LINES) - 1),
    field=st.sampled_from(["type", "session_id", "previous_session_id", "timestamp", "model"]),
    value=JSON_VALUES,
    cut=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
)
def test_events_with_a_field_of_another_type_or_a_cut_line_lose_no_line(tmp_path, line, field, value, cut):
    lines = list(LINES)
    if isinstance(lines[line], dict):
        lines[line] = {**lines[line], field: value}
    if cut is not None:
        text = lines[line] if isinstance(lines[line], str) else json.dumps(lines[line])
        lines[line] = text[:cut]
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    transcript(folder / "src")
    write_lines(folder / EVENTS, lines)
    batch.convert([folder / "src"], folder / "out", entire_events=[folder / "hooks"])
    source_lines = table(folder / "out", "source_lines").filter(pl.col("source_file") == EVENTS)
    assert source_lines.height == sum(1 for x in lines if (x if isinstance(x, str) else "x").strip())
    records = table(folder / "out", "records")
    assert records.get_column("record_id").is_duplicated().sum() == 0
    assert records.select("session_key", "seq").is_duplicated().sum() == 0
    mapped = source_lines.filter(pl.col("status") == "mapped").height
    assert records.filter(pl.col("record_source") == "entire_events").height == mapped


@pytest.mark.parametrize("batch_bytes", [1, 48 << 20], ids=["group_per_batch", "one_batch"])
def test_an_unchanged_events_file_is_reused_and_a_grown_one_converts_its_sessions_again(tmp_path, batch_bytes):
    src = tmp_path / "src"
    transcript(src)
    write_lines(tmp_path / EVENTS, LINES)
    kw = {"entire_events": [tmp_path / "hooks"], "batch_bytes": batch_bytes}
    out = tmp_path / "out"
    groups = batch.convert([src], out, **kw).manifest["reuse"]["session_groups_converted"]
    assert groups == 2  # SID with its transcript, SID2 of the events alone
    batch.convert([src], out, **kw)
    assert assert_same_as_full(src, out, tmp_path, **kw) == {
        "previous_output": True, "session_groups_reused": 2, "session_groups_converted": 0,
        "inputs_reused": 2, "inputs_converted": 0, "verified": False, "final_stage": "reused",
    }
    # one more event of SID2: the file changed, so both its sessions are converted again
    write_lines(tmp_path / EVENTS, [*LINES, {"type": 2, "session_id": SID2, "prompt": "again", "timestamp": ts(4, 40)}])
    batch.convert([src], out, **kw)
    summary = assert_same_as_full(src, out, tmp_path, **kw)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (0, 2)
    natives = table(out, "records").filter(pl.col("session_key") == SID2).get_column("native").to_list()
    assert sum('"prompt": "again"' in n for n in natives) == 1
    # SID's transcript grows, the events file does not: the output is still that of a full conversion
    path = src / "proj" / f"{SID}.jsonl"
    path.write_text(path.read_text() + json.dumps(user(uid(3), uid(2), "and more")) + "\n")
    batch.convert([src], out, **kw)
    assert assert_same_as_full(src, out, tmp_path, **kw)["session_groups_converted"] >= 1


def test_an_unchanged_events_file_is_not_read_again_at_discovery(tmp_path, monkeypatch):
    src = tmp_path / "src"
    transcript(src)
    write_lines(tmp_path / EVENTS, LINES)
    kw = {"entire_events": [tmp_path / "hooks"]}
    out = tmp_path / "out"
    batch.convert([src], out, **kw)
    heads = json.loads((out / "_reuse.json").read_text())["event_heads"]
    assert [s for s, _ in heads[EVENTS][2]] == [SID, SID2]
    read = []
    real = entire_events.read_lines
    monkeypatch.setattr(entire_events, "read_lines", lambda streams, *a: read.extend(s.name for s in streams) or real(streams, *a))
    batch.convert([src], out, **kw)
    assert read == []  # name, size and modification time unchanged: its sessions come from the state
    assert assert_same_as_full(src, out, tmp_path, **kw)["session_groups_reused"] == 2
    batch.convert([src], out, verify=True, **kw)
    assert EVENTS in read  # --verify reads every file again
    read.clear()
    write_lines(tmp_path / EVENTS, [*LINES, {"type": 2, "session_id": SID2, "prompt": "again", "timestamp": ts(4, 40)}])
    batch.convert([src], out, **kw)
    assert EVENTS in read  # a changed file is read again
    assert assert_same_as_full(src, out, tmp_path, **kw)["session_groups_converted"] == 2


def test_a_file_of_events_gone_is_carried_forward_from_an_output_of_another_version(tmp_path):
    """The output holds each event line (records.native, rejects.raw): with the file gone, an upgrade
    converts it again from that copy, a unit per session it names, and every table is the one a
    conversion of the file gives (but for whether the source was found). The file names sessions
    without a transcript (SID2, SID3): a session whose transcript is there is converted from what is
    there."""
    transcript(tmp_path / "src")
    write_lines(tmp_path / EVENTS, LINES[10:] + [{"type": 1, "session_id": SID3, "timestamp": ts(0, 50)}])
    want = tmp_path / "want"
    batch.convert([tmp_path / "src"], want, entire_events=[tmp_path / "hooks"])
    out = tmp_path / "out"
    batch.convert([tmp_path / "src"], out, entire_events=[tmp_path / "hooks"])
    (tmp_path / EVENTS).unlink()
    state = json.loads((out / "_reuse.json").read_text())
    state["tables"] = "0" * 16  # written by a version of other table columns
    (out / "_reuse.json").write_text(json.dumps(state))
    result = batch.convert([tmp_path / "src"], out)
    carried = result.manifest["carried"]
    assert carried["not_carried"] == [] and carried["inexact"] == []
    assert {SID2, SID3} <= set(carried["from"][0]["session_groups"])
    assert_tables_equal(out, want)
    assert batch.convert([tmp_path / "src"], out).manifest["reuse"]["session_groups_converted"] == 0
    assert_tables_equal(out, want)


def test_a_file_of_events_deleted_while_a_transcript_of_its_sessions_is_there_loses_no_row(tmp_path):
    """The file's events of the session whose transcript is still there are converted with it from the
    output's copy, and those of a session no file gives any more are kept (its source not present)."""
    transcript(tmp_path / "src")
    write_lines(tmp_path / EVENTS, LINES)
    want = tmp_path / "want"
    batch.convert([tmp_path / "src"], want, entire_events=[tmp_path / "hooks"])
    out = tmp_path / "out"
    batch.convert([tmp_path / "src"], out, entire_events=[tmp_path / "hooks"])
    (tmp_path / EVENTS).unlink()
    result = batch.convert([tmp_path / "src"], out)
    assert result.manifest["replaced"] == []
    assert_tables_equal(out, want)
    present = dict(table(out, "sessions").select("session_key", "source_present").iter_rows())
    assert present == {SID: True, SID2: False}
    assert batch.convert([tmp_path / "src"], out).manifest["reuse"]["session_groups_converted"] == 0
    assert_tables_equal(out, want)
