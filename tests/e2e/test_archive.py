"""An output is an archive: a re-run keeps the sessions whose sources are gone, accumulates several
archives, and `--prune` is the only way rows leave it (docs/asr-tables.md, "Keeping history")."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import batch
import batch.output.folder
from batch.cli import _summary
from batch.errors import OutputError
from batch.schema import TABLES
from conftest import (
    fault_env,
    ROOT,
    SAMPLE, assert_same_as_full, assistant, dumps, read_manifest, read_tables, small_sample, sorted_rows, timeless, uid,
    user,
)

VIEWER_SID = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
VIEWER = f"-Users-demo-viewer/{VIEWER_SID}.jsonl"
OTHER = "-Users-chip-dev-ai-music/fed8ce56-bc79-401f-a83e-af084253362f.jsonl"
NEW_SID = "99999999-9999-4999-8999-999999999999"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return small_sample(tmp_path / "laptop-projects")  # a folder named as a machine's archive


def assert_tables_equal(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame], *, presence: bool = True) -> None:
    """Every table equal row by row, whatever the order; without `sessions.source_present` when
    `presence` is False (a session given in one run of two is present in the other)."""
    for t in TABLES:
        a, b = timeless(got[t.name]), timeless(want[t.name])
        if not presence:
            a, b = a.drop("source_present", strict=False), b.drop("source_present", strict=False)
        try:
            assert_frame_equal(sorted_rows(a), sorted_rows(b), check_row_order=True)
        except AssertionError as exc:
            raise AssertionError(f"table {t.name}: {exc}") from None


def streams_of(sessions: pl.DataFrame, owner: str) -> pl.DataFrame:
    return sessions.filter((pl.col("session_key") == owner) | pl.col("session_key").str.starts_with(owner + "/"))


@pytest.mark.parametrize("batch_bytes", [1, 48 << 20])  # one batch per group; one batch for all
def test_a_deleted_session_is_kept_with_all_its_rows(sample, tmp_path, batch_bytes):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=batch_bytes)
    before = read_tables(out)
    (sample / VIEWER).unlink()  # as Claude Code's cleanup does
    result = batch.convert([sample], out, batch_bytes=batch_bytes)
    after = read_tables(out)
    # every table holds what it held: the deleted session's rows included, unchanged
    assert_tables_equal(after, before, presence=False)
    assert after["records"].filter(pl.col("session_key") == VIEWER_SID).height > 0
    sessions = after["sessions"]
    gone = streams_of(sessions, VIEWER_SID)
    assert gone.height >= 1 and gone.get_column("source_present").to_list() == [False] * gone.height
    assert sessions.filter(~pl.col("session_key").is_in(gone.get_column("session_key").implode())) \
        .get_column("source_present").all()
    # when each session was last read: the first run, for all (nothing was converted again)
    assert sessions.get_column("source_last_read_at").to_list() == \
        before["sessions"].sort("session_key").get_column("source_last_read_at").to_list()
    manifest = read_manifest(out)
    assert manifest["kept"] == [{
        "session_key": VIEWER_SID, "source_last_read_at": manifest["kept"][0]["source_last_read_at"],
        "inputs": [f"laptop-projects/{VIEWER}"],
    }]
    assert {i["path"] for i in manifest["inputs"]} >= {f"laptop-projects/{VIEWER}"}
    assert manifest["reuse"]["session_groups_kept"] == 1 and manifest["reuse"]["session_groups_converted"] == 0
    assert "kept 1 sessions whose sources are gone (--prune drops them)" in _summary(result)
    # a run that finds the same: kept again, and the final stage is the previous one
    batch.convert([sample], out, batch_bytes=batch_bytes)
    assert_tables_equal(read_tables(out), after)
    assert read_manifest(out)["reuse"]["final_stage"] == "reused"


def test_verify_keeps_the_sessions_whose_sources_are_gone(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)  # one batch holds every group: deleting one carves it
    before = read_tables(out)
    (sample / VIEWER).unlink()
    result = batch.convert([sample], out, verify=True)
    assert result.manifest["reuse"]["session_groups_kept"] == 1
    assert_tables_equal(read_tables(out), before, presence=False)
    result = batch.convert([sample], out, verify=True)  # and again, the kept group in a batch of its own
    assert result.manifest["reuse"]["session_groups_kept"] == 1 and result.manifest["reuse"]["verified"]
    assert_tables_equal(read_tables(out), before, presence=False)


def test_a_deleted_then_restored_session_is_present_again(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    before = read_tables(out)
    saved = tmp_path / "saved.jsonl"
    shutil.copy2(sample / VIEWER, saved)
    (sample / VIEWER).unlink()
    batch.convert([sample], out)
    shutil.copy2(saved, sample / VIEWER)  # name, size and modification time as before
    batch.convert([sample], out)
    assert_tables_equal(read_tables(out), before)
    assert read_tables(out)["sessions"].get_column("source_present").all()
    assert read_manifest(out)["kept"] == []


def test_prune_drops_the_sessions_whose_sources_are_gone(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    (sample / VIEWER).unlink()
    batch.convert([sample], out)
    result = batch.convert([sample], out, prune=True)
    summary = assert_same_as_full(sample, out, tmp_path)  # as if the session had never been given
    assert summary["session_groups_pruned"] == 1 and "session_groups_kept" not in summary
    assert read_tables(out)["records"].filter(pl.col("session_key") == VIEWER_SID).height == 0
    assert "pruned 1 sessions whose sources are gone" in _summary(result)


def test_an_interrupted_prune_prunes_nothing(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    (sample / VIEWER).unlink()
    batch.convert([sample], out)
    before = read_tables(out)
    env = fault_env("swap")
    proc = subprocess.run([sys.executable, "-m", "batch", "convert", str(sample), "--out", str(out), "--prune", "-q"],
                          env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert_tables_equal(read_tables(out), before)
    assert read_manifest(out)["reuse"]["session_groups_kept"] == 1


def split_sample(sample: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The sample's projects as two archives, a laptop's and a desktop's (folders of their own names:
    the outputs name a file by its input folder's name and its path there)."""
    laptop, desktop = sample, tmp_path / "desktop-projects"
    desktop.mkdir(parents=True)
    for project in ("-Users-demo-viewer", "-home-user-hooks"):
        shutil.move(laptop / project, desktop / project)
    return laptop, desktop


def test_two_archives_in_two_runs_give_the_tables_of_one_run_over_both(sample, tmp_path):
    laptop, desktop = split_sample(sample, tmp_path)
    team, once = tmp_path / "team", tmp_path / "once"
    batch.convert([laptop], team, batch_bytes=1)
    result = batch.convert([desktop], team)
    batch.convert([laptop, desktop], once)
    assert_tables_equal(read_tables(team), read_tables(once), presence=False)
    # the laptop's sessions were not given in the second run: kept, and said so
    sessions = read_tables(team)["sessions"]
    laptop_files = {f"laptop-projects/{p.relative_to(laptop)}" for p in laptop.rglob("*.jsonl")}
    absent = sessions.filter(~pl.col("source_present"))
    assert absent.height and all(set(files) <= laptop_files for files in absent.get_column("source_files").to_list())
    assert sessions.filter(pl.col("source_present")).height == sessions.height - absent.height
    mine, wanted = read_manifest(team), read_manifest(once)
    assert sorted(i["path"] for i in mine["inputs"]) == sorted(i["path"] for i in wanted["inputs"])
    assert mine["tables"] == wanted["tables"]
    assert result.manifest["reuse"]["session_groups_kept"] == len(mine["kept"]) > 0


def test_the_same_archive_at_another_path_is_not_doubled(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    before = read_tables(out)
    # moved (~/.claude moved elsewhere): the same names, sizes and times, nothing converted again
    moved = tmp_path / "elsewhere" / "laptop-projects"
    moved.parent.mkdir()
    shutil.move(sample, moved)
    result = batch.convert([moved], out)
    assert result.manifest["reuse"]["session_groups_converted"] == 0 and result.manifest["kept"] == []
    assert_tables_equal(read_tables(out), before)
    # copied under another name: converted from where it is now, the previous rows replaced
    copy = tmp_path / "backup"
    shutil.copytree(moved, copy)
    shutil.rmtree(moved)
    result = batch.convert([copy], out)
    after = read_tables(out)
    assert result.manifest["kept"] == [] and "session_groups_kept" not in result.manifest["reuse"]
    for name in ("sessions", "records", "inferences", "tool_calls", "source_lines"):
        assert after[name].height == before[name].height, name
    assert after["source_lines"].get_column("source_file").str.starts_with("backup/").all()


def test_an_inference_copied_into_two_archives_given_in_two_runs_has_one_usage_report(tmp_path):
    a, b = tmp_path / "a-projects" / "-p", tmp_path / "b-projects" / "-p"
    sid_b = "33333333-3333-4333-8333-333333333333"
    reply = dict(msg_id="msg_01COPIED", blocks=[{"type": "text", "text": "hello"}], output=42)
    a.mkdir(parents=True)
    (a / "11111111-1111-4111-8111-111111111111.jsonl").write_text(
        dumps(user(uid(1), None, "hi")) + "\n" + dumps(assistant(uid(2), uid(1), **reply)) + "\n")
    b.mkdir(parents=True)
    # a resumed session in the other archive copies the response under its own session ID
    (b / f"{sid_b}.jsonl").write_text(
        dumps(user(uid(1), None, "hi", sid=sid_b)) + "\n" + dumps(assistant(uid(2), uid(1), sid=sid_b, **reply)) + "\n"
        + dumps(user(uid(3), uid(2), "more", sid=sid_b)) + "\n")
    out, once = tmp_path / "out", tmp_path / "once"
    batch.convert([a.parent], out)
    batch.convert([b.parent], out)
    batch.convert([a.parent, b.parent], once)
    inferences = read_tables(out)["inferences"]
    assert inferences.filter(pl.col("inference_id") == "msg_01COPIED").height == 1
    assert inferences.filter(pl.col("inference_id") == "msg_01COPIED").get_column("output_total_tokens").to_list() == [42]
    assert_tables_equal(read_tables(out), read_tables(once), presence=False)


def test_a_grown_file_after_a_deleted_one(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    saved = tmp_path / "kept" / VIEWER
    saved.parent.mkdir(parents=True)
    shutil.copy2(sample / VIEWER, saved)
    (sample / VIEWER).unlink()
    batch.convert([sample], out)
    sid = "fed8ce56-bc79-401f-a83e-af084253362f"
    with (sample / OTHER).open("a", encoding="utf-8") as f:
        f.write(dumps(user(uid(990), None, "one more prompt", sid=sid)) + "\n")
    result = batch.convert([sample], out)
    assert result.manifest["reuse"]["session_groups_kept"] == 1
    # expected: a full conversion of what the output was ever given, the deleted file as it was
    everything = tmp_path / "everything" / "laptop-projects"
    shutil.copytree(sample, everything)
    shutil.copy2(saved, everything / VIEWER)
    full = tmp_path / "full"
    batch.convert([everything], full)
    assert_tables_equal(read_tables(out), read_tables(full), presence=False)
    grown = read_tables(out)["records"].filter(pl.col("session_key") == sid)
    assert "one more prompt" in " ".join(grown.get_column("native").to_list())


def test_a_rewritten_file_that_lost_lines_is_named_in_the_manifest(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    lines_before = read_tables(out)["source_lines"].filter(pl.col("source_file") == f"laptop-projects/{VIEWER}").height
    text = (sample / VIEWER).read_text(encoding="utf-8").splitlines(keepends=True)
    (sample / VIEWER).write_text("".join(text[:3]), encoding="utf-8")
    result = batch.convert([sample], out)
    assert result.manifest["replaced"] == [
        {"path": f"laptop-projects/{VIEWER}", "reason": "rewritten", "lines_before": lines_before}
    ]
    assert lines_before == len(text)
    assert "replaced the earlier lines of 1 rewritten or removed files" in _summary(result)
    batch.convert([sample], out)  # the next run replaces nothing
    assert read_manifest(out)["replaced"] == []


def test_a_kept_session_whose_parts_were_removed_is_refused_with_a_fix(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out, batch_bytes=1)
    (sample / VIEWER).unlink()
    batch.convert([sample], out, batch_bytes=1)
    holder = next(b for b in json.loads((out / "_reuse.json").read_text())["batches"] if VIEWER_SID in b["groups"])
    (out / "records" / f"part-{holder['part']}.parquet").unlink()
    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(OutputError, match="--prune"):
        batch.convert([sample], out, batch_bytes=1)
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing touched
    batch.convert([sample], out, batch_bytes=1, prune=True)
    assert_same_as_full(sample, out, tmp_path)


@pytest.mark.parametrize("written_by", [
    {"producer": {"name": "asr-batch", "version": "0.0.1"}},
    # the same version with other table columns: its parts would be reused beside parts of other columns
    {"tables": "0000000000000000"},
])
def test_an_output_whose_state_cannot_be_read_is_converted_again_keeping_its_sessions(sample, tmp_path, written_by):
    out = tmp_path / "out"
    batch.convert([sample], out)
    (sample / VIEWER).unlink()
    batch.convert([sample], out)
    before = read_tables(out)
    state = json.loads((out / "_reuse.json").read_text())
    assert len(state["tables"]) == 16
    (out / "_reuse.json").write_text(json.dumps({**state, **written_by}))
    result = batch.convert([sample], out)  # its kept session rebuilt from the output's copy of its file
    assert result.manifest["carried"]["from"][0]["session_groups"] == [VIEWER_SID]
    assert result.manifest["reuse"]["session_groups_reused"] == 0
    assert_tables_equal(read_tables(out), before)
    batch.convert([sample], out, prune=True)
    assert_same_as_full(sample, out, tmp_path)


def test_full_converts_every_present_session_again_and_keeps_the_others(sample, tmp_path):
    out = tmp_path / "out"
    batch.convert([sample], out)
    before = read_tables(out)
    (sample / VIEWER).unlink()
    result = batch.convert([sample], out, full=True)
    reuse = result.manifest["reuse"]
    assert reuse["session_groups_kept"] == 1 and reuse["session_groups_reused"] == 0
    assert reuse["session_groups_converted"] == len({r["session_key"] for r in result.manifest["kept"]}) + 3
    assert_tables_equal(read_tables(out), before, presence=False)


def test_a_second_run_on_the_same_output_waits_for_the_first(sample, tmp_path):
    laptop, desktop = split_sample(sample, tmp_path)
    out = tmp_path / "team"
    batch.convert([laptop], out)
    waiting, done = threading.Event(), threading.Event()
    errors = []

    def second():
        try:
            batch.convert([desktop], out, warn=lambda m: waiting.set() if "waiting for it to finish" in m else None)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
        done.set()

    with batch.output.folder.lock_output(out):  # a first run holding the output
        thread = threading.Thread(target=second)
        thread.start()
        assert waiting.wait(120), "the second run did not say it waits"
        assert not done.is_set()
    thread.join(300)
    assert not errors and done.is_set()
    once = tmp_path / "once"
    batch.convert([laptop, desktop], once)
    assert_tables_equal(read_tables(out), read_tables(once), presence=False)


def test_an_entire_repository_not_given_again_keeps_its_checkpoints(tmp_path):
    from entire_repos import build_scenario

    repo = build_scenario(tmp_path / "entire")["work"]
    claude = tmp_path / "claude-projects"
    shutil.copytree(SAMPLE / "-Users-demo-viewer", claude / "-Users-demo-viewer")
    out, once = tmp_path / "out", tmp_path / "once"
    batch.convert([repo], out)
    batch.convert([claude], out)
    batch.convert([repo, claude], once)
    got, want = read_tables(out), read_tables(once)
    assert got["checkpoints"].height > 0
    assert_tables_equal(got, want, presence=False)
    repo_sessions = got["sessions"].filter(pl.col("content_level") == "redacted")
    assert repo_sessions.height and not repo_sessions.get_column("source_present").any()


def test_watch_converts_each_change_and_stops_cleanly_on_sigint(sample, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "batch", "convert", str(sample), "--out", str(out), "--watch"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def wait_for(text: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert proc.poll() is None, "the watch ended"
                continue
            if text in line:
                return line
        pytest.fail(f"no line with {text!r} within {timeout} s")

    try:
        wait_for("watching")
        first = read_manifest(out)["tables"]["sessions"]
        (sample / "-Users-demo-viewer" / f"{NEW_SID}.jsonl").write_text(
            dumps(user(uid(1), None, "a new session", sid=NEW_SID)) + "\n")
        line = wait_for("updated after")
        assert "converted 1 sessions" in line
        sessions = read_tables(out)["sessions"]
        assert sessions.height == first + 1 and NEW_SID in sessions.get_column("session_key").to_list()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0
        wait_for("stopped watching", timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert read_tables(out)["sessions"].height == first + 1  # the last complete output is in place
    assert not list(out.parent.glob(f".{out.name}.asr-run-*"))
