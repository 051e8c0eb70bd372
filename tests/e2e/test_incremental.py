"""Incremental re-runs: a conversion over a previous output reuses the rows of unchanged session
groups, and its output equals a full conversion of the same input, table by table and row by row."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

import batch
import batch.pipeline
import batch.output.folder
import batch.output.manifest
import batch.run.finalize
import batch.run.schedule
from batch.cli import _reuse_summary
from batch.errors import OutputError
from batch.incremental.state import StoredFingerprint, StoredGroups
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import fingerprint_of
from conftest import (
    assert_tables_equal,
    fault_env,
    ROOT,
    assert_same_as_full, assistant, dumps, read_manifest, read_tables, small_sample, sorted_rows, tool_result,
    tool_use, uid, usage, user,
)

VIEWER = "-Users-demo-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
SUBAGENT = "-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a4ca7529859c158c2.jsonl"
NEW_SID = "99999999-9999-4999-8999-999999999999"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return small_sample(tmp_path / "src")


def grow(path: Path, sid: str, n: int) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(dumps(user(uid(900 + n), None, f"one more prompt {n}", sid=sid)) + "\n")


def session_ids(sample: Path) -> set[str]:
    """The session IDs the sample's lines carry: one session group each (a subagent's lines carry its parent's)."""
    found = set()
    for path in sample.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found.add(json.loads(line).get("sessionId"))
    return found - {None}  # file-history-snapshot lines carry none


def test_nothing_changed_reuses_every_batch_and_the_final_stage(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    groups = read_manifest(out)["reuse"]["session_groups_converted"]
    assert groups == len(session_ids(sample))
    result = batch.convert([sample], out, batch_bytes=1)
    summary = assert_same_as_full(sample, out, tmp_path)
    with duckdb.connect(str(out / "asr.duckdb"), read_only=True) as con:  # the reused catalog reads the new output
        assert con.sql("select count(*) from records").fetchall()[0][0] == read_tables(out)["records"].height
    assert summary == {
        "previous_output": True, "session_groups_reused": groups, "session_groups_converted": 0,
        "inputs_reused": result.inputs, "inputs_converted": 0, "verified": False, "final_stage": "reused",
    }


def test_a_re_run_never_parses_the_lists_of_the_previous_manifest_that_grow_with_the_archive(
        sample, tmp_path, monkeypatch):
    """The previous manifest's inputs and unassigned facts are copied as they are, or taken from the
    state, never parsed (batch/output/manifest.py): 90 MB of text at 8 GiB of archive."""
    out = tmp_path / "out"
    batch.convert([sample], out)
    before = read_manifest(out)
    assert before["inputs"] and before["_meta"]["com.anthropic.claude-code/unassigned"]
    parsed = []

    class Counting:
        def __getattr__(self, name):
            return getattr(json, name)

        def loads(self, text, *args, **kwargs):
            value = json.loads(text, *args, **kwargs)
            parsed.append(value)
            return value

    monkeypatch.setattr(batch.output.manifest, "json", Counting())
    result = batch.convert([sample], out)  # nothing changed: the manifest reports the previous one's
    assert result.manifest["reuse"]["final_stage"] == "reused"
    assert {k: v for k, v in read_manifest(out).items() if k not in ("skipped", "reuse")} == {
        k: v for k, v in before.items() if k not in ("skipped", "reuse")
    }
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 1)
    result = batch.convert([sample], out)  # the final stage runs
    assert result.manifest["reuse"]["final_stage"] == "run"
    assert parsed and "format" in parsed[0]  # the manifest was read, a key at a time
    assert not [v for v in parsed if v in (before["inputs"], before["_meta"]) or (isinstance(v, dict) and "inputs" in v)]


@pytest.mark.parametrize("change", ["grow", "add", "delete_session", "delete_subagent", "grow_subagent"])
def test_a_changed_input_converts_only_its_group(sample, tmp_path, change):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)  # one batch per session group
    everything = tmp_path / "everything"
    batch.convert([sample], everything)
    groups = read_manifest(out)["reuse"]["session_groups_converted"]
    if change == "grow":
        grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 1)
    elif change == "add":
        (sample / "-Users-demo-viewer" / f"{NEW_SID}.jsonl").write_text(dumps(user(uid(1), None, "new", sid=NEW_SID)) + "\n")
    elif change == "delete_session":
        (sample / VIEWER).unlink()
    elif change == "delete_subagent":
        (sample / SUBAGENT).unlink()
    else:
        with (sample / SUBAGENT).open("a", encoding="utf-8") as f:
            f.write("\n")
    # a deleted session is kept unless pruned (tests/e2e/test_archive.py): pruned, it is as if never given
    result = batch.convert([sample], out, batch_bytes=1, prune=change == "delete_session")
    if change == "delete_subagent":
        # a file gone from a group that is still there is converted with it from the output's copy: nothing lost
        assert_tables_equal(out, everything)
        assert result.manifest["replaced"] == []
        assert batch.convert([sample], out, batch_bytes=1).manifest["reuse"]["session_groups_converted"] == 0
        assert_tables_equal(out, everything)
        return
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["final_stage"] == "run"
    if change == "delete_session":
        assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 0)
    elif change == "add":
        assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups, 1)
    else:
        assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 1)


def test_a_new_batch_size_still_reuses_and_gives_the_same_output(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 2)
    batch.convert([sample], out)  # the default: every changed group in one batch
    summary = assert_same_as_full(sample, out, tmp_path, batch_bytes=1 << 30)
    # the grown group is converted, every other reused
    assert summary["session_groups_converted"] == 1 and summary["session_groups_reused"] == len(session_ids(sample)) - 1
    # and again, from batches of several groups to one group per batch
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 3)
    batch.convert([sample], out, batch_bytes=1)
    assert_same_as_full(sample, out, tmp_path)


@pytest.mark.parametrize("change", ["grow", "grow_subagent", "delete_session"])
def test_a_batch_mixing_a_changed_group_with_unchanged_ones_converts_only_the_changed_one(sample, tmp_path, change):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    groups = read_manifest(out)["reuse"]["session_groups_converted"]
    assert groups == len(session_ids(sample)) and len(list((out / "records").glob("part-*.parquet"))) == 1
    if change == "grow":
        grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 4)
    elif change == "grow_subagent":
        with (sample / SUBAGENT).open("a", encoding="utf-8") as f:
            f.write("\n")
    else:
        (sample / VIEWER).unlink()
    batch.convert([sample], out, prune=change == "delete_session")
    summary = assert_same_as_full(sample, out, tmp_path)
    if change == "delete_session":
        assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 0)
    else:
        assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 1)
    # the unchanged groups' rows, carved out of the old batch, are a batch of their own the next run reuses
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["session_groups_converted"] == 0 and summary["final_stage"] == "reused"


def test_a_growing_session_ends_up_in_a_batch_of_its_own(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    groups = read_manifest(out)["reuse"]["session_groups_converted"]
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 6)
    batch.convert([sample], out)  # the grown group in one batch, the others in another
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 7)
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 1)


@pytest.mark.parametrize("how", ["verify", "part_removed"])
def test_unchanged_groups_of_a_batch_that_cannot_be_carved_are_converted_again(sample, tmp_path, how):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    groups = read_manifest(out)["reuse"]["session_groups_converted"]
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 8)
    if how == "part_removed":
        next((out / "_work" / "session_streams").glob("part-*.parquet")).unlink()
    batch.convert([sample], out, verify=how == "verify")
    summary = assert_same_as_full(sample, out, tmp_path)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (0, groups)


@pytest.mark.parametrize("folder", ["records", "_work/session_streams"])
def test_a_batch_whose_part_was_removed_is_converted_again(sample, tmp_path, folder):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    groups = read_manifest(out)["reuse"]["session_groups_converted"]
    next((out / folder).glob("part-*.parquet")).unlink()
    batch.convert([sample], out, batch_bytes=1)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 1)


def test_full_reuses_nothing(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    batch.convert([sample], out, batch_bytes=1, full=True)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["session_groups_reused"] == 0 and summary["final_stage"] == "run"


@pytest.mark.parametrize("layout", [None, 1])
def test_a_state_of_another_layout_reuses_nothing(sample, tmp_path, layout):
    out = tmp_path / "out"
    batch.convert([sample], out)
    saved = _state(out)
    if layout is None:  # written before the state had a layout
        del saved["layout"]
    else:
        saved["layout"] = layout
    (out / "_reuse.json").write_text(json.dumps(saved))
    # read as a source: every session converted again (from its file), none reused
    summary = batch.convert([sample], out).manifest["reuse"]
    assert summary["session_groups_reused"] == 0 and summary["final_stage"] == "run"
    assert assert_same_as_full(sample, out, tmp_path)["session_groups_reused"] == 0


SUMMARIES = ROOT / "tests/fixtures/registry/core/summaries"  # a session whose summary lines name other sessions' leaves
SUMMARIES_FILE = "-home-user-deploy/c0000000-0000-4000-8000-000000000001.jsonl"


def _as_written_before(out: Path, work_table: str) -> None:
    """Make `out` the output this version writes as it was written before `work_table` existed."""
    shutil.rmtree(out / "_work" / work_table)
    saved = _state(out)
    for entry in saved["batches"]:
        entry["work"] = [t for t in entry.get("work", []) if t != work_table]
        entry.get("rows", {}).pop(f"_work/{work_table}", None)
    saved["tables"] = batch.incremental.state.tables_digest(frozenset({work_table}))
    (out / "_reuse.json").write_text(json.dumps(saved))


@pytest.mark.parametrize("batch_bytes", [1, None])
def test_an_output_written_before_a_work_table_existed_is_upgraded_and_keeps_what_it_holds(sample, tmp_path, batch_bytes):
    shutil.copytree(SUMMARIES, sample, dirs_exist_ok=True)
    out, kw = tmp_path / "out", {"batch_bytes": batch_bytes} if batch_bytes else {}
    batch.convert([sample], out, **kw)
    unassigned = read_manifest(out)["_meta"]["com.anthropic.claude-code/unassigned"]
    assert {"Kubernetes Ingress Debugging Session", "Release Notes Drafting"} <= {f["value"] for f in unassigned}
    work = _work_tables(out)
    assert work["unowned_summaries"].height == len(unassigned)
    _as_written_before(out, "unowned_summaries")
    records = out / "records"
    before = {p.name: p.stat().st_ino for p in records.glob("*.parquet")}
    (sample / SUMMARIES_FILE).unlink()  # its session is kept, and so are its unassigned facts
    warned = []
    batch.convert([sample], out, warn=warned.append, **kw)
    assert [w for w in warned if "_work/unowned_summaries" in w] == [
        f"{out.resolve()} was written before _work/unowned_summaries existed: derived from its parts."
    ]
    manifest = read_manifest(out)
    assert manifest["_meta"]["com.anthropic.claude-code/unassigned"] == unassigned
    assert manifest["reuse"]["session_groups_kept"] == 1
    sessions = read_tables(out)["sessions"]
    assert sessions.filter(pl.col("session_key") == SUMMARIES_FILE.split("/")[1][:-6])["source_present"].to_list() == [False]
    # the upgraded output's work tables are those this version writes, and its parts the same files
    for name, frame in _work_tables(out).items():
        assert sorted_rows(frame).equals(sorted_rows(work[name])), name
    assert {p.name: p.stat().st_ino for p in records.glob("*.parquet")} == before
    assert _state(out)["tables"] == batch.incremental.state.tables_digest()
    # and it is reused as any output of this version: nothing changed, nothing converted
    again = batch.convert([sample], out, warn=warned.append, **kw).manifest["reuse"]
    assert again["session_groups_converted"] == 0 and again["final_stage"] == "reused"


def test_an_output_whose_columns_differ_otherwise_is_not_upgraded(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    saved = _state(out)
    saved["tables"] = batch.incremental.state.tables_digest(frozenset(WORK_SCHEMAS))  # lacks every work table
    (out / "_reuse.json").write_text(json.dumps(saved))
    warned = []
    summary = batch.convert([sample], out, warn=warned.append).manifest["reuse"]  # converted again, not upgraded
    assert summary["session_groups_reused"] == 0 and not [w for w in warned if "derived from its parts" in w]
    assert_same_as_full(sample, out, tmp_path)


def test_a_change_that_keeps_size_and_time_is_found_by_verify_only(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    path = sample / VIEWER
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("a", "b", 1), encoding="utf-8")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    batch.convert([sample], out, batch_bytes=1)
    # as make and rsync: size and time unchanged, so the previous conversion stays
    assert read_manifest(out)["reuse"]["session_groups_converted"] == 0
    batch.convert([sample], out, batch_bytes=1, verify=True)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["verified"] and summary["session_groups_converted"] == 1


def test_a_tool_result_file_appearing_converts_everything_again(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    folder = sample / "-Users-demo-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a" / "tool-results"
    folder.mkdir(parents=True)
    (folder / "toolu_01.txt").write_text("output")
    batch.convert([sample], out, batch_bytes=1)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["session_groups_reused"] == 0


def test_an_interrupted_incremental_run_leaves_the_previous_output_intact(sample, tmp_path, monkeypatch):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 5)

    def fail(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(batch.run.finalize, "finalize", fail)
    with pytest.raises(KeyboardInterrupt):
        batch.convert([sample], out, batch_bytes=1)
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before
    assert not [p for p in tmp_path.iterdir() if ".asr-run-" in p.name]
    monkeypatch.undo()
    batch.convert([sample], out, batch_bytes=1)
    assert_same_as_full(sample, out, tmp_path)


def test_a_foreign_file_among_the_work_tables_is_refused(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    (out / "_work" / "session_streams" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"_work/session_streams/notes\.txt"):
        batch.convert([sample], out)
    assert (out / "_work" / "session_streams" / "notes.txt").read_text() == "mine"


def _count_peeks(monkeypatch) -> list[str]:
    """Record the files whose first lines discovery reads."""
    import batch.sources.claude_code as cc

    peeked, head = [], cc._head

    def counting(path, codec=None):
        peeked.append(os.path.basename(path))
        return head(path, codec)

    monkeypatch.setattr(cc, "_head", counting)
    return peeked


def test_unchanged_files_are_classified_from_the_state_without_reading_them(sample, tmp_path, monkeypatch):
    out = tmp_path / "out"
    peeked = _count_peeks(monkeypatch)
    batch.convert([sample], out)
    files = len(peeked)
    assert files == len(list(sample.rglob("*.jsonl"))) and files > 3
    peeked.clear()
    batch.convert([sample], out)
    assert peeked == []
    grow(sample / VIEWER, "1af7fc5e-8455-4414-9ccd-011d40f70b2a", 9)
    batch.convert([sample], out)
    assert peeked == [Path(VIEWER).name]
    peeked.clear()
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["session_groups_converted"] == 1
    assert len(peeked) == files  # the full conversion into a new folder reads every head
    peeked.clear()
    batch.convert([sample], out, verify=True)  # --verify reads every head again, as it hashes every file
    assert len(peeked) == files
    peeked.clear()
    batch.convert([sample], out, full=True)
    assert len(peeked) == files


@pytest.mark.parametrize("change", ["session", "subagent"])
def test_a_file_whose_classification_changes_is_classified_again(sample, tmp_path, change):
    # a transcript whose name is not a session ID: its session comes from its first lines
    path = sample / "-Users-demo-viewer" / "notes.jsonl"
    path.write_text(dumps(user(uid(1), None, "first", sid=NEW_SID)) + "\n")
    out = tmp_path / "out"
    batch.convert([sample], out)
    assert NEW_SID in read_tables(out)["sessions"]["session_key"].to_list()
    other = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
    if change == "session":  # now the lines of another session
        path.write_text(dumps(user(uid(2), None, "second", sid="88888888-8888-4888-8888-888888888888")) + "\n")
    else:  # now a subagent of an existing session
        path.write_text(dumps(user(uid(2), None, "task", sid=other, agentId="a1b2c3", isSidechain=True)) + "\n")
    batch.convert([sample], out)
    assert_same_as_full(sample, out, tmp_path)
    assert NEW_SID not in read_tables(out)["sessions"]["session_key"].to_list()


def test_verify_classifies_a_file_changed_without_changing_its_size_and_time(sample, tmp_path):
    path = sample / "-Users-demo-viewer" / "notes.jsonl"
    path.write_text(dumps(user(uid(1), None, "first", sid=NEW_SID)) + "\n")
    out = tmp_path / "out"
    batch.convert([sample], out)
    st = path.stat()
    moved = "88888888-8888-4888-8888-888888888888"
    path.write_text(path.read_text().replace(NEW_SID, moved))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    batch.convert([sample], out)
    # as make and rsync: size and time unchanged, so the previous classification and conversion stay
    assert NEW_SID in read_tables(out)["sessions"]["session_key"].to_list()
    batch.convert([sample], out, verify=True)
    assert_same_as_full(sample, out, tmp_path)
    assert moved in read_tables(out)["sessions"]["session_key"].to_list()


def test_batches_hold_sessions_of_the_same_age():
    from batch.sources.base import Loaded, Unit, batches

    def unit(owner: str, mtime: int) -> Unit:
        return Unit(owner, 10, lambda: Loaded(), fingerprint=((f"{owner}.jsonl", 10, mtime, None),), newest=mtime)

    # by owner the newest two (b, d) would fall into different batches; by their newest file they share one
    units = [unit("a", 1), unit("b", 4), unit("c", 2), unit("d", 3)]
    assert [[u.owner for u in group] for group in batches(units, max_bytes=20)] == [["a", "c"], ["d", "b"]]
    # a group's age is that of its newest unit; ties go by owner
    old, late = unit("a", 1), unit("a", 9)
    assert [[u.owner for u in g] for g in batches([old, late, unit("e", 9), unit("f", 0)], max_bytes=20)] == [
        ["f"], ["a", "a"], ["e"]
    ]


def test_a_unit_has_the_age_of_its_newest_file(tmp_path):
    from batch.sources.base import Stream
    from batch.sources.files import FileTable

    main = Stream("p/s.jsonl", 5, "main", "s", "s", mtime_ns=3)
    subagent = Stream("p/agent-x.jsonl", 5, "subagent", "x", "s/x", parent_session_id="s", agent_id="x", mtime_ns=7)
    table = FileTable(tmp_path)
    table.add(subagent, (None, "s"))
    table.add(main, (None, "s"))
    assert [(u.owner, u.newest, u.size) for u in table.units()] == [("s", 7, 10)]


def test_a_head_entry_that_does_not_fit_is_not_used(sample):
    from batch.sources.claude_code import discover

    def shape(found):
        return [(f.name, f.session_key, f.stream_kind, f.parent_session_id, f.agent_id) for f in found.files]

    first = discover([sample])
    heads = dict(first.files.heads())
    assert dict(discover([sample], known=heads.items()).files.heads()) == heads
    gone = {f"gone/{n}.jsonl": [1, 1, None, "s"] for n in range(2)}
    assert shape(discover([sample], known=[*heads.items(), *gone.items()])) == shape(first)
    damaged = {name: [size, mtime, "../elsewhere", None] for name, (size, mtime, _, _) in heads.items()}
    damaged[next(iter(damaged))] = ["not", "a head"]
    assert shape(discover([sample], known=damaged.items())) == shape(first)


def test_a_head_entry_of_the_same_size_and_time_is_used_instead_of_the_head(tmp_path):
    """A file whose name, size and modification time are those of its entry of the previous heads is
    classified by that entry: its head is not read again. Not so when the entry is of another size.
    Of a name given twice, the last entry counts (as a JSON object keeps it)."""
    from batch.sources.claude_code import discover

    root = tmp_path / "proj"
    root.mkdir()
    sid, other = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    plain = root / "notes.jsonl"  # not named by a UUID: its session is what its head names
    plain.write_text(json.dumps({"type": "user", "sessionId": sid}) + "\n")
    st = plain.stat()

    def session(known):
        return [f.session_id for f in discover([root], known=known).files]

    assert session(None) == session([]) == [sid]
    assert session([("proj/notes.jsonl", [st.st_size, st.st_mtime_ns, None, other])]) == [other]
    assert session([("proj/notes.jsonl", [st.st_size + 1, st.st_mtime_ns, None, other])]) == [sid]
    twice = [("proj/notes.jsonl", [st.st_size, st.st_mtime_ns, None, other]), ("proj/notes.jsonl", ["not", "a head"])]
    assert session(twice) == [sid] and session(twice[::-1]) == [other]
    # a compressed transcript is found by its plain form's name, at the size of its bytes decompressed
    import pyarrow as pa

    data = plain.read_bytes()
    plain.unlink()
    with pa.CompressedOutputStream(str(root / "notes.jsonl.zst"), "zstd") as fh:
        fh.write(data)
    st = (root / "notes.jsonl.zst").stat()
    assert session([("proj/notes.jsonl", [len(data), st.st_mtime_ns, None, other])]) == [other]
    assert session([("proj/notes.jsonl.zst", [len(data), st.st_mtime_ns, None, other])]) == [sid]


# Re-runs of grown groups as deltas: a batch holding a grown group beside unchanged ones keeps its
# parts, and only the grown group's new rows are written (batch/pipeline.py `_deltas`).

VIEWER_SID = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
TOOL_SID = "77777777-7777-4777-8777-777777777777"


def _deltas(out: Path) -> dict | None:
    return read_manifest(out)["reuse"].get("deltas")


def _holders(out: Path, owner: str) -> list[str]:
    """The batches of the reuse state that list `owner`."""
    state = json.loads((out / "_reuse.json").read_text())
    return [b["part"] for b in state["batches"] if owner in b["groups"]]


def _parts(out: Path, table: str = "records") -> dict[str, int]:
    """Each part file of `table` by name, with its inode (a linked part keeps it)."""
    return {p.name: p.stat().st_ino for p in (out / table).glob("part-*.parquet")}


def test_a_line_appended_to_a_session_sharing_a_batch_is_written_as_a_delta(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    before = _parts(out)
    grow(sample / VIEWER, VIEWER_SID, 10)
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"]["session_groups"] == 1 and summary["deltas"]["rewritten"] == 0
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (4, 1)
    assert "converted 1, 1 of them grown, their earlier rows kept where unchanged" in _reuse_summary(summary)
    # the big tables took the new rows only; the previous batch's part is the same file
    for table in ("records", "source_lines", "parts", "tool_calls"):
        assert table not in summary["deltas"]["tables_fell_back"]
    after = _parts(out)
    (kept,) = before
    assert after[kept] == before[kept] and len(after) == 2
    new = next(name for name in after if name != kept)
    assert pl.read_parquet(out / "records" / new).height == 1  # the appended line
    assert len(_holders(out, VIEWER_SID)) == 2
    # nothing changed: every part is reused, the final stage too
    batch.convert([sample], out)
    assert assert_same_as_full(sample, out, tmp_path)["final_stage"] == "reused"


def test_growth_that_changes_earlier_rows_falls_back_for_those_tables(sample, tmp_path):
    path = sample / "-Users-demo-viewer" / f"{TOOL_SID}.jsonl"
    prompt = user(uid(1), None, "list the files", sid=TOOL_SID)
    call = assistant(uid(2), uid(1), "msg_01", [tool_use("toolu_delta")], stop="tool_use", sid=TOOL_SID)
    path.write_text(dumps(prompt) + "\n" + dumps(call) + "\n")
    out = tmp_path / "out"
    batch.convert([sample], out)
    with path.open("a") as f:  # the result of the call, which completes its tool_calls row
        f.write(dumps(tool_result(uid(3), uid(2), "toolu_delta", "a.txt", sid=TOOL_SID)) + "\n")
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"]["session_groups"] == 1
    assert "tool_calls" in summary["deltas"]["tables_fell_back"]
    assert "records" not in summary["deltas"]["tables_fell_back"]
    calls = read_tables(out)["tool_calls"].filter(pl.col("session_key") == TOOL_SID)
    assert calls.height == 1


@pytest.mark.parametrize("size", ["same", "larger"])
def test_a_file_rewritten_with_another_prefix_falls_back(sample, tmp_path, size):
    out = tmp_path / "out"
    batch.convert([sample], out)
    path = sample / VIEWER
    text = path.read_text(encoding="utf-8")
    changed = text.replace("a", "b", 1)
    assert changed != text
    path.write_text(changed + (dumps(user(uid(950), None, "after", sid=VIEWER_SID)) + "\n" if size == "larger" else ""),
                    encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new time, at least the same size
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"] == {"session_groups": 1, "rewritten": 1, "tables_fell_back": {}}
    assert _holders(out, VIEWER_SID) and len(_holders(out, VIEWER_SID)) <= 2


@pytest.mark.parametrize("then", ["shrink", "remove"])
def test_a_group_growing_twice_spans_three_batches_and_is_then_carved_out_of_all(sample, tmp_path, then):
    out = tmp_path / "out"
    batch.convert([sample], out)
    for n in (11, 12):
        grow(sample / VIEWER, VIEWER_SID, n)
        batch.convert([sample], out)
        assert assert_same_as_full(sample, out, tmp_path)["deltas"]["session_groups"] == 1
    assert len(_holders(out, VIEWER_SID)) == 3 and len(_parts(out)) == 3
    path = sample / VIEWER
    if then == "shrink":
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(lines[:-3]), encoding="utf-8")
    else:
        path.unlink()
    batch.convert([sample], out, prune=then == "remove")
    summary = assert_same_as_full(sample, out, tmp_path)
    assert "deltas" not in summary
    assert len(_holders(out, VIEWER_SID)) == (1 if then == "shrink" else 0)
    if then == "shrink":
        # converted again in a batch of its own: its next growth converts it again, no delta needed
        grow(sample / VIEWER, VIEWER_SID, 13)
        batch.convert([sample], out)
        summary = assert_same_as_full(sample, out, tmp_path)
        assert "deltas" not in summary and summary["session_groups_converted"] == 1


def test_a_new_subagent_file_in_a_grown_group(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    owner = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    folder = (sample / SUBAGENT).parent
    agent = "a0000000000000001"
    (folder / f"agent-{agent}.jsonl").write_text(
        dumps(user(uid(960), None, "a new task", sid=owner, agentId=agent, isSidechain=True)) + "\n"
    )
    grow(sample / "-experiments-worktrees" / f"{owner}.jsonl", owner, 14)
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"]["session_groups"] == 1 and summary["deltas"]["rewritten"] == 0
    assert any(f"agent-{agent}" in p for p in read_tables(out)["records"]["source_file"].unique().to_list())


def test_verify_over_a_delta_state_finds_a_change_that_keeps_size_and_time(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    grow(sample / VIEWER, VIEWER_SID, 15)
    batch.convert([sample], out)
    assert _deltas(out)["session_groups"] == 1
    batch.convert([sample], out, verify=True)  # nothing changed: every group reused and verified
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["verified"] and summary["session_groups_converted"] == 0
    path = sample / VIEWER
    st = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("a", "b", 1), encoding="utf-8")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    batch.convert([sample], out)
    assert read_manifest(out)["reuse"]["session_groups_converted"] == 0  # as make and rsync
    batch.convert([sample], out, verify=True)
    summary = assert_same_as_full(sample, out, tmp_path)
    # its rows span both batches, the first of which holds every group: all are converted again
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (0, 5)
    assert "deltas" not in summary


def test_a_removed_delta_part_converts_the_groups_sharing_its_rows_again(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    groups = read_manifest(out)["reuse"]["session_groups_converted"]
    grow(sample / VIEWER, VIEWER_SID, 16)
    batch.convert([sample], out)
    state = json.loads((out / "_reuse.json").read_text())
    delta = next(b["part"] for b in state["batches"] if list(b["groups"]) == [VIEWER_SID] and b["inputs"])
    (out / "records" / f"part-{delta}.parquet").unlink()
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (0, groups)


@pytest.mark.parametrize("step", ["batch", "batches"])
def test_an_interrupted_delta_run_leaves_the_previous_output_intact(sample, tmp_path, step):
    out = tmp_path / "out"
    batch.convert([sample], out)
    grow(sample / VIEWER, VIEWER_SID, 17)
    batch.convert([sample], out)  # a delta state
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    grow(sample / VIEWER, VIEWER_SID, 18)
    env = fault_env(step)
    proc = subprocess.run([sys.executable, "-m", "batch", "convert", str(sample), "--out", str(out), "-q"],
                          env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"]["session_groups"] == 1


def test_a_delta_beside_a_rewritten_group_of_the_same_batch(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    grow(sample / VIEWER, VIEWER_SID, 19)
    other = sample / "-Users-chip-dev-ai-music" / "fed8ce56-bc79-401f-a83e-af084253362f.jsonl"
    lines = other.read_text(encoding="utf-8").splitlines(keepends=True)
    other.write_text("".join(lines[1:]), encoding="utf-8")  # its first line removed: not growth
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"]["session_groups"] == 1
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (3, 2)
    assert _holders(out, "fed8ce56-bc79-401f-a83e-af084253362f") and len(_holders(out, VIEWER_SID)) == 2


def test_a_grown_group_larger_than_a_batch_is_not_a_delta(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    grow(sample / VIEWER, VIEWER_SID, 20)
    batch.convert([sample], out, batch_bytes=1)  # every group is larger than a batch now
    summary = assert_same_as_full(sample, out, tmp_path)
    assert "deltas" not in summary and (summary["session_groups_reused"], summary["session_groups_converted"]) == (4, 1)


def _work_tables(out: Path) -> dict[str, pl.DataFrame]:
    """Every `_work/` table of `out` that has parts, read from out/_work/<table>/*.parquet."""
    work = out / "_work"
    return {name: pl.read_parquet(work / name / "*.parquet") for name in WORK_SCHEMAS if any((work / name).glob("*.parquet"))}


def _assert_same_work_tables(got: Path, want: Path) -> None:
    from polars.testing import assert_frame_equal

    mine, wanted = _work_tables(got), _work_tables(want)
    assert mine.keys() == wanted.keys() and {"inference_candidates", "session_streams"} <= mine.keys()
    for name in wanted:
        assert_frame_equal(sorted_rows(mine[name]), sorted_rows(wanted[name]), check_row_order=True)


def test_the_work_tables_rows_do_not_depend_on_the_batch(sample, tmp_path):
    # every group in one batch, and every group in a batch of its own: the same _work/ rows
    one, each = tmp_path / "one", tmp_path / "each"
    batch.convert([sample], one, full=True)
    batch.convert([sample], each, full=True, batch_bytes=1)
    assert len(_parts(one)) == 1 and len(_parts(each)) == len(session_ids(sample))
    _assert_same_work_tables(each, one)


def test_a_delta_keeps_the_work_tables_rows_that_did_not_change(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    before = {p.name: p.stat().st_ino for p in (out / "_work" / "inference_candidates").glob("part-*.parquet")}
    last = "549b3502-6e30-4fa5-869f-c998df26c3f0"  # the viewer session's last line
    with (sample / VIEWER).open("a", encoding="utf-8") as f:  # a new prompt and its response
        f.write(dumps(user(uid(950), last, "and now?", sid=VIEWER_SID)) + "\n")
        f.write(dumps(assistant(uid(951), uid(950), "msg_delta_01", [{"type": "text", "text": "done"}], stop="end_turn",
                                usage_=usage(2.5), sid=VIEWER_SID)) + "\n")
    batch.convert([sample], out)
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"]["session_groups"] == 1 and summary["deltas"]["rewritten"] == 0
    fell_back = summary["deltas"]["tables_fell_back"]
    # the stream's summary row changed (its end, record and line counts): carved out and written whole
    assert fell_back.get("_work/session_streams") == 1
    for table in ("_work/inference_candidates", "_work/lineage_evidence", "_work/number_faults"):
        assert table not in fell_back
    _assert_same_work_tables(out, tmp_path / "full")
    # the previous batch's part of inference_candidates is the same file; the delta's holds the new response
    after = {p.name: p.stat().st_ino for p in (out / "_work" / "inference_candidates").glob("part-*.parquet")}
    (kept,) = before
    assert after[kept] == before[kept] and len(after) == 2
    new = pl.read_parquet(out / "_work" / "inference_candidates" / next(n for n in after if n != kept))
    assert new.get_column("inference_id").to_list() == ["msg_delta_01"]
    faults = pl.read_parquet(out / "_work" / "number_faults" / "*.parquet").filter(pl.col("session_key") == VIEWER_SID)
    assert faults.height == 1 and faults.get_column("native_value").to_list() == ["2.5"]


def _state(out: Path) -> dict:
    return json.loads((out / "_reuse.json").read_text())


def test_the_state_records_each_parts_rows_per_group(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    (entry,) = _state(out)["batches"]
    rows, groups = entry["rows"], sorted(entry["groups"])
    assert rows.keys() == {*entry["counts"], *(f"_work/{t}" for t in entry["work"])}
    records = read_tables(out)["records"]
    for label, counts in rows.items():
        assert len(counts) == len(groups) and sum(counts) == pl.read_parquet(
            out / label / f"part-{entry['part']}.parquet").height
    viewer = next(i for i, g in enumerate(groups) if VIEWER_SID in g)
    assert rows["records"][viewer] == records.filter(pl.col("session_key").str.starts_with(VIEWER_SID)).height > 0


@pytest.mark.parametrize("state", ["recorded", "not_recorded", "not_fitting"])
def test_a_delta_takes_the_rows_per_group_from_the_state(sample, tmp_path, monkeypatch, state):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group
    if state != "recorded":  # a state of an earlier version, or one whose rows do not fit the parts
        saved = _state(out)
        for entry in saved["batches"]:
            if state == "not_recorded":
                del entry["rows"]
            else:
                entry["rows"]["records"][0] += 1
        (out / "_reuse.json").write_text(json.dumps(saved))
    grow(sample / VIEWER, VIEWER_SID, 12)
    read = []
    real = pl.read_parquet
    monkeypatch.setattr(pl, "read_parquet", lambda source, *a, **kw: read.append(Path(source)) or real(source, *a, **kw))
    batch.convert([sample], out)
    monkeypatch.undo()
    summary = assert_same_as_full(sample, out, tmp_path)
    assert summary["deltas"]["session_groups"] == 1
    # the stream summaries change as a session grows, and so does the viewer's first prompt: it held
    # only a slash command (/init), and the prompt appended names it now
    assert summary["deltas"]["tables_fell_back"] == {"_work/session_streams": 1, "_work/first_prompts": 1}
    tables = sorted({p.parent.name for p in read})
    if state == "recorded":  # only the parts that lose rows are read
        assert tables == ["first_prompts", "session_streams"]
    else:  # the key columns of every part, to tell each row's group
        assert {"records", "parts", "inference_candidates"} <= set(tables)
    # the new state records the rows of the previous batch's parts and of the delta's
    entries = _state(out)["batches"]
    assert len(entries) == 2 and all("rows" in e for e in entries)
    batch.convert([sample], out)
    assert assert_same_as_full(sample, out, tmp_path)["final_stage"] == "reused"


def test_an_unchanged_group_holds_the_states_owner_and_fingerprint_not_copies(sample, tmp_path, monkeypatch):
    out = tmp_path / "out"
    batch.convert([sample], out)
    changed = sample / VIEWER
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 1_000_000_000))
    found = {}

    def planned(output, p, found_all, taken, **kw):  # the plan as the tasks get it
        # the previous groups' fingerprints are where the state file holds them, not texts
        assert all(isinstance(b.groups, StoredGroups) for b in p.previous.batches)
        groups = {o: (o, fp) for b in p.previous.batches for o, fp in b.groups.items()}
        assert len(found_all.units) == len(groups) > 2
        for unit in found_all.units:
            owner, fp = groups[unit.owner]
            # the changed group's fingerprint is told from its rows when asked, not from the state file
            found[unit.owner] = (unit.owner is owner, isinstance(unit.fingerprint, StoredFingerprint),
                                 fingerprint_of(unit.fingerprint) == fingerprint_of(fp))
        raise KeyboardInterrupt

    monkeypatch.setattr(batch.run.schedule, "run_plan", planned)
    with pytest.raises(KeyboardInterrupt):
        batch.convert([sample], out)
    assert found.pop(changed.stem) == (False, False, False)  # a main session: its own group
    assert set(found.values()) == {(True, True, True)}
