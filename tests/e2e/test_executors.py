"""Executors (batch/run/executors.py): a run's tasks on Dask workers give every table a local run
gives; a worker killed in a task, a worker that cannot see the inputs, no Dask installed, and
Ctrl-C during a Dask run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import psutil
import pytest
from conftest import (
    fault_env,
    ROOT,
    CORPUS, dumps, read_manifest, read_tables, run_folders, sorted_rows, timeless, tree, uid, user, write_jsonl,
)
from distributed import LocalCluster
from polars.testing import assert_frame_equal

import batch
import batch.incremental.carving
import batch.output.folder
import batch.run.task
from batch.run import executors
from batch.run.memory import Stop
from batch.schema import TABLES



def assert_same_output(got: Path, want: Path) -> None:
    """Every table of `got` holds the rows of `want`'s, and the manifests are the same (but for what
    was reused of a previous output, and the part files' digests: `sessions.source_last_read_at` is
    when each run ran)."""
    mine, wanted = read_tables(got), read_tables(want)
    for t in TABLES:
        assert_frame_equal(sorted_rows(timeless(mine[t.name])), sorted_rows(timeless(wanted[t.name])))
    manifests = read_manifest(got), read_manifest(want)
    for manifest in manifests:
        manifest.pop("reuse"), manifest.pop("files")
    assert manifests[0] == manifests[1]


def sessions(src: Path, n: int) -> None:
    """`n` sessions of about 20 KB each, in one project folder."""
    for k in range(n):
        sid = f"{k:08d}-0000-4000-8000-000000000000"
        write_jsonl(src / f"{sid}.jsonl", [user(uid(j), uid(j - 1) if j else None, f"{k} {j} " + "x" * 2000, sid=sid)
                                           for j in range(10)])


def shortened(src: Path, k: int) -> str:
    """Drop the last line of session `k` (of `sessions`): changed, not grown. Its session ID."""
    sid = f"{k:08d}-0000-4000-8000-000000000000"
    lines = (src / f"{sid}.jsonl").read_text().splitlines(keepends=True)
    (src / f"{sid}.jsonl").write_text("".join(lines[:-1]))
    return sid


def kill_once(monkeypatch, step: str, killed: Path) -> None:
    """The first worker process that reaches `step` kills itself there, once, creating `killed`
    (tests/faults/sitecustomize.py)."""
    for name, value in fault_env(f"once:{step}", once=killed).items():
        monkeypatch.setenv(name, value)


def temporaries(out: Path) -> list[Path]:
    return [p for p in out.rglob(".part-*")]


@pytest.fixture(scope="module")
def scheduler():
    """An existing Dask scheduler with two single-threaded worker processes: its address."""
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", scheduler_kwargs={"dashboard": False}) as cluster:
        yield cluster.scheduler_address


def test_the_corpus_on_a_local_cluster_gives_every_table_of_a_local_run(corpus_out, tmp_path):
    out = tmp_path / "out"
    batch.convert([CORPUS], out, executor="dask", workers=2)
    assert_same_output(out, corpus_out)
    assert temporaries(out) == []


def test_an_external_scheduler_with_two_workers_gives_every_table_of_a_local_run(scheduler, src, tmp_path):
    sessions(src, 12)
    local, remote = tmp_path / "local", tmp_path / "remote"
    batch.convert([src], local, batch_bytes=50_000)
    result = batch.convert([src], remote, batch_bytes=50_000, executor=scheduler)
    # several batches, spread over the two workers
    assert len(json.loads((remote / "_reuse.json").read_text())["batches"]) >= 4
    assert result.tables["sessions"] == 12
    assert_same_output(remote, local)
    # a re-run through the scheduler reuses everything
    again = batch.convert([src], remote, batch_bytes=50_000, executor=scheduler)
    assert again.manifest["reuse"]["session_groups_converted"] == 0
    assert_same_output(remote, local)


def test_a_grown_session_is_re_run_as_a_delta_on_the_workers_not_in_the_driver(scheduler, src, tmp_path, monkeypatch):
    sessions(src, 6)
    local, remote = tmp_path / "local", tmp_path / "remote"
    batch.convert([src], remote, batch_bytes=50_000, executor=scheduler)
    sid = f"{3:08d}-0000-4000-8000-000000000000"
    with (src / f"{sid}.jsonl").open("a") as fh:
        fh.write(dumps(user(uid(10), uid(9), "one more", sid=sid)) + "\n")

    def in_the_driver(*args, **kw):
        raise AssertionError("a batch or a delta converted in the process that plans the run")

    monkeypatch.setattr(batch.run.task, "convert_batch", in_the_driver)  # (the workers' own is not patched)
    result = batch.convert([src], remote, batch_bytes=50_000, executor=scheduler)
    assert result.manifest["reuse"]["deltas"]["session_groups"] == 1
    monkeypatch.undo()
    batch.convert([src], local, batch_bytes=50_000)  # a full local run of the grown sessions
    assert_same_output(remote, local)


def test_the_kept_groups_of_a_changed_batch_are_carved_on_the_workers_not_in_the_driver(scheduler, src, tmp_path, monkeypatch):
    sessions(src, 6)
    local, remote = tmp_path / "local", tmp_path / "remote"
    batch.convert([src], remote, batch_bytes=50_000, executor=scheduler)
    batch.convert([src], local, batch_bytes=50_000)
    before = {b["part"]: set(b["groups"]) for b in json.loads((remote / "_reuse.json").read_text())["batches"]}
    sid = shortened(src, 3)

    def in_the_driver(*args, **kw):
        raise AssertionError("a batch converted or carved in the process that plans the run")

    # (the workers' own are not patched)
    monkeypatch.setattr(batch.run.task, "convert_batch", in_the_driver)
    monkeypatch.setattr(batch.incremental.carving, "carve", in_the_driver)
    result = batch.convert([src], remote, batch_bytes=50_000, executor=scheduler)
    assert result.manifest["reuse"]["session_groups_converted"] == 1
    after = {b["part"]: set(b["groups"]) for b in json.loads((remote / "_reuse.json").read_text())["batches"]}
    shared = next(groups for groups in before.values() if sid in groups)
    assert len(shared) > 1  # the changed session shared its batch: the others' rows were carved out of it
    assert shared - {sid} in after.values()
    assert temporaries(remote) == []
    monkeypatch.undo()
    batch.convert([src], local, batch_bytes=50_000)  # the same re-run, carved in the process
    assert_same_output(remote, local)


@pytest.mark.parametrize("step", ["batch", "carve"])
def test_a_worker_killed_in_a_task_is_replaced_and_its_task_run_again_without_duplicates(step, src, tmp_path, monkeypatch):
    """A worker killed while it converts a batch (a first run), or while it carves a previous batch
    (a re-run after a change)."""
    sessions(src, 6)
    local, remote = tmp_path / "local", tmp_path / "remote"
    if step == "carve":
        for out in (local, remote):
            batch.convert([src], out, batch_bytes=50_000)
        shortened(src, 3)  # its batch's other group is carved out
    batch.convert([src], local, batch_bytes=50_000)
    killed = tmp_path / "killed"
    kill_once(monkeypatch, step, killed)  # in the first such task a worker starts
    batch.convert([src], remote, batch_bytes=50_000, executor="dask", workers=2)
    assert killed.exists()  # a worker died in the task
    assert_same_output(remote, local)
    assert temporaries(remote) == []


def test_a_worker_that_cannot_see_an_input_or_the_run_folder_is_refused_before_any_task(scheduler, tmp_path):
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    executor = executors.make(scheduler, 2, Stop())
    try:
        executor.check(run_folder, [tmp_path])  # both seen: nothing to say
        with pytest.raises(executors.ExecutorError) as caught:
            executor.check(run_folder, [tmp_path / "elsewhere"])
        assert f"cannot see the input {tmp_path / 'elsewhere'}" in str(caught.value)
        assert "(and 1 more workers)" in str(caught.value)  # asked of each of the two workers
        with pytest.raises(executors.ExecutorError, match="cannot write the run folder"):
            executor.check(tmp_path / "gone", [tmp_path])
    finally:
        executor.close()


def test_the_driver_keeps_a_short_log_of_the_messages_dask_sent():
    # each message that submits a task holds its pickle: Dask's 1,000 kept per stream held about 23 KiB
    # a task in the driver (its scheduler's streams to the workers, the client's to the scheduler)
    default = dask.config.get("distributed.admin.low-level-log-length")
    executor = executors.make("dask", 2, Stop())
    try:
        scheduler = executor._cluster.scheduler
        streams = [executor._client.scheduler_comm, *scheduler.stream_comms.values()]
        assert len(streams) == 3  # the client's, and one to each worker
        assert {s.recent_message_log.maxlen for s in streams} == {executors.LOG_LENGTH}
        assert scheduler.transition_log.maxlen == executors.LOG_LENGTH
    finally:
        executor.close()
    assert executors.LOG_LENGTH < default == dask.config.get("distributed.admin.low-level-log-length")  # left as it was


def test_without_dask_the_error_says_how_to_install_it(src, out, monkeypatch):
    write_jsonl(src / "s.jsonl", [user(uid(1), None, "hello")])
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    with pytest.raises(executors.ExecutorError, match=r"pip install 'asr-batch\[dask\]'"):
        batch.convert([src], out, executor="dask")
    with pytest.raises(executors.ExecutorError, match="give local, dask, or a Dask scheduler's address"):
        batch.convert([src], out, executor="spark")
    assert not out.exists()


def test_ctrl_c_during_a_dask_run_ends_its_workers_and_keeps_the_previous_output(src, out):
    sessions(src, 2)
    batch.convert([src], out)
    old = tree(out)
    sessions(src, 4)
    stalled = out.parent / "stalled"
    env = fault_env("stall:batch", stalled=stalled)
    proc = subprocess.Popen(
        [sys.executable, "-m", "batch", "convert", str(src), "--out", str(out), "-q", "--executor", "dask"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120  # a worker reaches its stall: generous on a loaded machine
    while not stalled.exists() and time.monotonic() < deadline:
        try:
            proc.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            pass
    assert stalled.exists(), "no task reached its stall"
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children  # the LocalCluster's worker processes
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert err.endswith("Error: stopped by SIGINT; the previous output, if any, is unchanged.\n")
    assert tree(out) == old
    assert run_folders(out) == []
    _, alive = psutil.wait_procs(children, timeout=60)
    assert alive == []  # the stalled worker is gone with its cluster
