"""What a run may replace, what it never touches, and what an interruption leaves behind."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, SID, SID2, assistant, fault_env, run_folders, tree, uid, user, write_jsonl

import batch
import batch.output.folder
from batch.errors import OutputError, SourceError
from batch.output.folder import MARKER, RUN_INFIX, Output



def two_sessions(src: Path) -> None:
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello"), assistant(uid(2), uid(1), "msg_01A", [])])
    write_jsonl(src / f"{SID2}.jsonl", [user(uid(3), None, "again", sid=SID2)])


def catalog_count(out: Path, table: str = "records") -> int:
    """Rows of `table` through OUT/asr.duckdb, as an analyst opens it."""
    with duckdb.connect(str(out / "asr.duckdb"), read_only=True) as con:
        return con.sql(f"select count(*) from {table}").fetchall()[0][0]


# --- only our own output is replaced ---------------------------------------------------------


@pytest.mark.parametrize(
    "manifest",
    [
        {"manifest_version": 3, "name": "My extension", "version": "1.0"},  # a browser extension
        {"format": {"name": "asr"}, "producer": {"name": "someone-else"}, "tables": {}},
        {"format": {"name": "asr"}, "producer": {"name": "asr-batch"}},  # no tables listed
        "not even an object",
    ],
    ids=["web-extension", "other-producer", "no-tables", "not-an-object"],
)
def test_a_folder_with_someone_elses_manifest_is_refused_and_untouched(src, tmp_path, manifest):
    two_sessions(src)
    target = tmp_path / "webext"
    target.mkdir()
    (target / "manifest.json").write_text(json.dumps(manifest))
    (target / "background.js").write_text("console.log(1)")
    before = tree(target)
    with pytest.raises(OutputError, match="not an asr-batch output"):
        batch.convert([src], target)
    assert tree(target) == before
    assert run_folders(target) == []


def test_an_output_holding_files_we_did_not_write_is_refused_and_untouched(src, out):
    two_sessions(src)
    batch.convert([src], out)
    (out / "my-notes.md").write_text("findings")
    (out / "records" / "extra.parquet").write_bytes(b"mine")
    before = tree(out)
    with pytest.raises(OutputError, match=r"also holds files asr-batch did not write \(my-notes.md, records/extra.parquet\)"):
        batch.convert([src], out)
    assert tree(out) == before


def test_an_out_in_folders_that_do_not_exist_yet_is_created(src, tmp_path):
    two_sessions(src)
    out = tmp_path / "results" / "2026" / "asr-out"
    batch.convert([src], out)
    assert catalog_count(out) == 3


def test_our_previous_output_is_replaced_whole(src, out):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    batch.convert([src], out)
    assert catalog_count(out) == 1
    two_sessions(src)
    batch.convert([src], out)
    assert catalog_count(out) == 3
    assert json.loads((out / "manifest.json").read_text())["tables"]["records"] == 3
    assert (out / MARKER).is_file()
    assert run_folders(out) == []


@pytest.mark.parametrize("where", ["is the input", "is inside the input", "contains the input"])
def test_out_overlapping_an_input_is_refused(src, tmp_path, where):
    two_sessions(src)
    (src / "manifest.json").write_text('{"name": "a file of the project"}')
    out = {"is the input": src, "is inside the input": src / "asr-out", "contains the input": tmp_path}[where]
    before = tree(tmp_path)
    with pytest.raises(OutputError, match=where):
        batch.convert([src], out)
    assert tree(tmp_path) == before


def test_the_cli_refuses_an_input_folder_as_out_with_one_line(src, capsys):
    from batch.cli import main

    two_sessions(src)
    (src / "manifest.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        main(["convert", str(src), "--out", str(src), "-q"])
    err = capsys.readouterr().err
    assert exc.value.code == 1
    assert err.startswith("Error: --out") and "is the input" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in src.iterdir()) == sorted([f"{SID}.jsonl", f"{SID2}.jsonl", "manifest.json"])


def test_the_writer_removes_only_names_it_writes(tmp_path):
    """Every removal path of the writer, given a tree that mixes our files with someone else's."""
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"keep")
    folder = tmp_path / "out"
    ours = ["manifest.json", "asr.duckdb", MARKER, "records/part-00000.parquet", "records/part-00001.parquet",
            "_work/lineage_evidence/part-00000.parquet", "_spill/duckdb_temp_block-1.block"]
    theirs = ["notes.txt", "records/part-1.parquet", "records/keep.txt", "photos/cat.jpg",
              "_work/lineage_evidence/mine.csv", "manifest.json.bak"]
    for name in ours + theirs:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x")
    (folder / "records" / "part-00002.parquet").symlink_to(outside)
    (folder / "sessions").symlink_to(tmp_path)  # a table-named link to a folder of someone else's
    batch.output.folder._remove_ours(folder, tables=["records"], work=True, spill=True)
    left = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    assert left == sorted(theirs + ["records/part-00002.parquet", "sessions"])
    assert outside.read_bytes() == b"keep"


def test_no_removal_during_a_run_touches_a_path_it_did_not_create(src, out, monkeypatch, tmp_path):
    """Record every unlink and rmdir of a conversion over a previous output: each one is a path this
    run created, or a file the previous output's manifest stands for."""
    two_sessions(src)
    batch.convert([src], out)
    previous = set(tree(out))
    removed: list[Path] = []
    for name in ("unlink", "rmdir", "remove"):
        real = getattr(os, name)

        def spy(path, *a, _real=real, **kw):
            removed.append(Path(os.fsdecode(path)))
            return _real(path, *a, **kw)

        monkeypatch.setattr(os, name, spy)
    monkeypatch.setattr(shutil, "rmtree", lambda *a, **kw: pytest.fail("rmtree removes what it did not list"))
    before = set(p for p in tmp_path.rglob("*"))
    batch.convert([src], out)
    for path in removed:
        if path in before and path.is_relative_to(tmp_path):
            # the only pre-existing paths removed are files of the previous output (moved aside by the swap)
            rel = path.relative_to(path.parent if path.parent.name.startswith(".") else out).as_posix()
            assert path.parent.name.startswith(f".{out.name}{RUN_INFIX}") or rel in previous, path
    assert src.is_dir() and sorted(p.name for p in src.iterdir()) == [f"{SID}.jsonl", f"{SID2}.jsonl"]


# --- interruptions ---------------------------------------------------------------------------------


def test_stale_run_folders_are_removed_only_when_ours_and_dead(src, out):
    two_sessions(src)
    batch.convert([src], out)
    stale = out.with_name(f".{out.name}{RUN_INFIX}0000dead")
    (stale / "records").mkdir(parents=True)
    (stale / "records" / "part-00000.parquet").write_bytes(b"partial")
    (stale / MARKER).write_text("{}")
    live = out.with_name(f".{out.name}{RUN_INFIX}00001ive")
    live.mkdir()
    (live / MARKER).write_text("{}")
    not_ours = out.with_name(f".{out.name}{RUN_INFIX}0000user")
    not_ours.mkdir()
    (not_ours / "thesis.txt").write_text("mine")
    with open(live / MARKER) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        warnings: list[str] = []
        batch.convert([src], out, warn=warnings.append)
    assert not stale.exists()
    assert (live / MARKER).is_file()
    assert (not_ours / "thesis.txt").read_text() == "mine"
    assert warnings == [f"removed 1 unfinished output folder(s) of {out} left by an interrupted run."]


def test_an_aborted_run_leaves_files_it_did_not_write(src, out):
    output = Output(out)
    (output.tmp / "records").mkdir()
    (output.tmp / "records" / "part-00000.parquet").write_bytes(b"ours")
    (output.tmp / "someone.txt").write_text("not ours")
    output.abort()
    assert sorted(p.name for p in output.tmp.iterdir()) == ["someone.txt"]
    with pytest.raises(OutputError, match="stopped"):
        output.part("records", 1)


# The CLI as `python -m batch` runs it, but on a system without the atomic exchange: renameat2 is
# reported as not offered, so the swap takes the two renames of the fallback (batch.output.folder._swap).
NO_EXCHANGE = (
    "import sys, batch.cli, batch.output.folder; "
    "batch.output.folder._renameat2 = lambda src, dst, flags: False; "
    "batch.cli.main(sys.argv[1:])"
)


def _cli(
    args: list[str], *, fault: str | None = None, stalled: Path | None = None, exchange: bool = True, **kw,
) -> subprocess.Popen:
    env = fault_env(fault, stalled=stalled) if fault else {
        k: v for k, v in os.environ.items() if not k.startswith("ASR_BATCH_FAULT")}
    command = ["-m", "batch"] if exchange else ["-c", NO_EXCHANGE]
    return subprocess.Popen(
        [sys.executable, *command, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, **kw,
    )


@pytest.mark.parametrize("step", ["batch", "batches", "final", "swap", "swapped"])
def test_a_kill_at_any_step_leaves_the_old_or_the_new_output_complete(src, out, step):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    batch.convert([src], out)
    old = tree(out)
    two_sessions(src)
    proc = _cli(["convert", str(src.parent), "--out", str(out), "-q"], fault=step)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    count = catalog_count(out)
    if step in ("swapped",):
        assert count == 3  # the exchange happened: the new output, catalog included
    else:
        assert count == 1 and tree(out) == old
    assert json.loads((out / "manifest.json").read_text())["tables"]["records"] == count
    batch.convert([src.parent], out)  # the next run removes what the killed one left
    assert run_folders(out) == []
    assert catalog_count(out) == 3


def test_a_kill_between_the_two_renames_of_the_fallback_swap_is_documented(src, out):
    """Where the system has no atomic exchange, a kill between the renames leaves no folder at `out`
    and the previous output, whole, beside it under a run folder's name, with the killed run's
    complete output; the next run makes that output `out` again and goes on from it
    (docs/asr-tables.md, "What a run replaces")."""
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    batch.convert([src], out)
    old = tree(out)
    two_sessions(src)
    # swap-aside: the previous output was renamed aside, the new one not yet renamed to `out`
    proc = _cli(["convert", str(src), "--out", str(out), "-q"], fault="swap-aside", exchange=False)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err  # only the fallback swap reaches this step
    assert not out.exists() and not out.is_symlink()
    left = {name: tree(out.parent / name) for name in run_folders(out)}
    # the previous output, byte for byte, and the killed run's folder, its new output complete
    (aside,) = [name for name, files in left.items() if files == old]
    (new,) = set(left) - {aside}
    assert json.loads(left[new]["manifest.json"])["tables"]["records"] == 3
    assert {"asr.duckdb", MARKER} <= set(left[new])
    # the next run finishes the swap (the killed run's output is `out` again, read as the previous
    # output: nothing of it is lost, a session whose file is gone meanwhile included) and removes the other
    (src / f"{SID}.jsonl").unlink()
    warnings: list[str] = []
    result = batch.convert([src], out, warn=warnings.append)
    assert warnings == [
        f"{out} was missing: the output of a run interrupted while it replaced it ({new}) is {out} again.",
        f"removed 1 unfinished output folder(s) of {out} left by an interrupted run.",
    ]
    assert result.manifest["reuse"]["previous_output"] is True and result.manifest["reuse"]["session_groups_kept"] == 1
    assert run_folders(out) == []
    assert catalog_count(out) == 3


@pytest.mark.parametrize(("signum", "step"), [(signal.SIGTERM, "stall:batch"), (signal.SIGINT, "stall:batches"),
                                              (signal.SIGHUP, "stall:swap")])
def test_a_signal_removes_the_run_folder_and_keeps_the_previous_output(src, out, signum, step):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    batch.convert([src], out)
    old = tree(out)
    two_sessions(src)
    stalled = out.parent / "stalled"
    proc = _cli(["convert", str(src), "--out", str(out), "-q"], fault=step, stalled=stalled)
    deadline = time.monotonic() + 120  # the run reaches its stall: generous on a loaded machine
    while not stalled.exists() and time.monotonic() < deadline:
        try:
            proc.wait(timeout=0.05)  # waits on the process itself: ended, it will never stall
            break
        except subprocess.TimeoutExpired:
            pass
    assert stalled.exists(), "the run did not reach its stall"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert err == f"Error: stopped by {name}; the previous output, if any, is unchanged.\n"
    assert tree(out) == old
    assert run_folders(out) == []


# --- every input accounted for ----------------------------------------------------------------------


@contextmanager
def unprivileged():
    """Run the body as an unprivileged user when the tests run as root (root reads every file)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@contextmanager
def readable_resources(monkeypatch, folder: Path):
    """Read asr-batch's SQL files and prices from a copy in `folder`, so that a run as another user
    does not need to read the checkout (which may lie in a folder only its owner can enter)."""
    from batch import sql
    from batch.output import catalog

    shutil.copytree(sql.sql_dir(), folder / "sql")
    shutil.copy(catalog.pricing_csv(), folder / "pricing.csv")
    caches = (sql.files, sql.load, sql.macro_texts)
    with monkeypatch.context() as patch:
        patch.setattr(sql, "sql_dir", lambda: folder / "sql")
        patch.setattr(catalog, "sql_dir", lambda: folder / "sql")
        patch.setattr(catalog, "pricing_csv", lambda: folder / "pricing.csv")
        for cached in caches:
            cached.cache_clear()
        try:
            yield
        finally:
            for cached in caches:
                cached.cache_clear()


def test_unreadable_files_and_folders_are_skipped_with_a_reason(tmp_path, monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="asr-perm-", dir="/tmp"))
    src = base / "projects" / "proj"
    two_sessions(src)
    write_jsonl(src / "locked" / "33333333-3333-4333-8333-333333333333.jsonl", [user(uid(5), None, "x")])
    secret = src / "44444444-4444-4444-8444-444444444444.jsonl"
    write_jsonl(secret, [user(uid(6), None, "y")])
    out = base / "out"
    batch.convert([src.parent], out)  # as ourselves first: every module the run needs is loaded
    for path in [base, *base.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    (src / "locked").chmod(0o000)
    secret.chmod(0o000)
    try:
        with readable_resources(monkeypatch, base / "resources"), unprivileged():
            manifest = batch.convert([src.parent], out).manifest
        skipped = {s["path"]: s["reason"] for s in manifest["skipped"].parse()}
        assert skipped == {
            "projects/proj/locked": "folder cannot be read (Permission denied)",
            "projects/proj/44444444-4444-4444-8444-444444444444.jsonl": "cannot be read (Permission denied)",
        }
        # the sessions read before are kept, their sources not read this time
        assert sorted(i["path"] for i in manifest["inputs"].parse()) == [
            f"projects/proj/{SID}.jsonl", f"projects/proj/{SID2}.jsonl", "projects/proj/44444444-4444-4444-8444-444444444444.jsonl",
            "projects/proj/locked/33333333-3333-4333-8333-333333333333.jsonl",
        ]
        assert [k["inputs"] for k in manifest["kept"]] == [
            ["projects/proj/locked/33333333-3333-4333-8333-333333333333.jsonl"],
            ["projects/proj/44444444-4444-4444-8444-444444444444.jsonl"],
        ]
    finally:
        (src / "locked").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_links_loops_fifos_orphan_sidecars_and_odd_names_are_each_accounted_for(tmp_path, out):
    src = tmp_path / "projects"
    two_sessions(src / "proj")
    (src / "proj" / "back").symlink_to(src)  # a loop
    (src / "elsewhere").symlink_to(src / "proj")  # the same folder a second time
    os.mkfifo(src / "proj" / "pipe.jsonl")
    (src / "proj" / "broken.jsonl").symlink_to(tmp_path / "missing.jsonl")
    (src / "proj" / "agent-a1.meta.json").write_text("{}")
    odd = os.fsencode(src / "proj") + b"/caf\xe9.jsonl"  # Latin-1 bytes, not UTF-8
    with open(odd, "wb") as fh:
        fh.write(json.dumps(user(uid(9), None, "odd", sid="55555555-5555-4555-8555-555555555555")).encode() + b"\n")
    result = batch.convert([src], out)
    manifest = result.manifest
    assert {s["path"]: s["reason"] for s in manifest["skipped"].parse()} == {
        "projects/elsewhere": "symbolic link loop: the same folder as projects/proj",  # real folders first
        "projects/proj/back": "symbolic link loop: the same folder as projects",
        "projects/proj/pipe.jsonl": "not a regular file",
        "projects/proj/broken.jsonl": "broken symbolic link",
        "projects/proj/agent-a1.meta.json": "sidecar without its transcript",
    }
    paths = sorted(i["path"] for i in manifest["inputs"].parse())
    assert paths == [f"projects/proj/{SID}.jsonl", f"projects/proj/{SID2}.jsonl", "projects/proj/caf\\xe9.jsonl"]
    assert catalog_count(out, "source_lines") == 4


def test_a_file_reached_by_several_paths_is_read_once_by_the_first_in_walk_order(tmp_path, out):
    """A link to a transcript, named before or after it, and a source inside another: each file is
    read once, by the path the walk reaches it first (a folder's names in order, the sources in the
    order given); the others are skipped as the same file."""
    src = tmp_path / "projects"
    two_sessions(src / "proj")
    (src / "proj" / "00-first.jsonl").symlink_to(src / "proj" / f"{SID2}.jsonl")  # before its target
    (src / "proj" / "zz-last.jsonl").symlink_to(src / "proj" / f"{SID}.jsonl")  # after its target
    result = batch.convert([src, src / "proj"], out)
    assert {s["path"]: s["reason"] for s in result.manifest["skipped"].parse()} == {
        f"projects/proj/{SID2}.jsonl": "same file as projects/proj/00-first.jsonl",
        "projects/proj/zz-last.jsonl": f"same file as projects/proj/{SID}.jsonl",
        f"proj/{SID}.jsonl": f"same file as projects/proj/{SID}.jsonl",
        f"proj/{SID2}.jsonl": "same file as projects/proj/00-first.jsonl",
        "proj/00-first.jsonl": "same file as projects/proj/00-first.jsonl",
        "proj/zz-last.jsonl": f"same file as projects/proj/{SID}.jsonl",
    }
    assert sorted(i["path"] for i in result.manifest["inputs"].parse()) == [
        "projects/proj/00-first.jsonl", f"projects/proj/{SID}.jsonl"]
    assert catalog_count(out, "source_lines") == 3


def test_inputs_whose_folders_share_a_name_keep_distinct_source_files(tmp_path, out):
    a, b = tmp_path / "a" / "proj", tmp_path / "b" / "proj"
    write_jsonl(a / f"{SID}.jsonl", [user(uid(1), None, "one"), user(uid(2), uid(1), "two")])
    write_jsonl(b / f"{SID2}.jsonl", [user(uid(3), None, "three", sid=SID2)])
    result = batch.convert([b, a], out)
    assert {i["path"]: i["lines"] for i in result.manifest["inputs"].parse()} == {
        f"a/proj/{SID}.jsonl": 2, f"b/proj/{SID2}.jsonl": 1,
    }
    with duckdb.connect(str(out / "asr.duckdb"), read_only=True) as con:
        rows = con.sql("select source_file, count(*) from source_lines group by all order by 1").fetchall()
    assert rows == [(f"a/proj/{SID}.jsonl", 2), (f"b/proj/{SID2}.jsonl", 1)]


def test_a_byte_order_mark_is_stripped_and_recorded(src, out):
    line = json.dumps(user(uid(1), None, "first prompt")).encode()
    (src / f"{SID}.jsonl").write_bytes(b"\xef\xbb\xbf" + line + b"\n")
    result = batch.convert([src], out)
    (entry,) = result.manifest["inputs"].parse()
    assert entry["byte_order_mark"] is True and entry["size"] == len(line) + 4
    with duckdb.connect(str(out / "asr.duckdb"), read_only=True) as con:
        assert con.sql("select status, byte_offset, byte_length from source_lines").fetchall() == [
            ("mapped", 3, len(line))
        ]
        assert con.sql("select count(*) from rejects").fetchall() == [(0,)]
        assert con.sql("select text from parts where part_type = 'text'").fetchall() == [("first prompt",)]


def test_deep_nesting_in_the_first_lines_is_a_reject_not_a_traceback(src, out):
    deep = "[" * 50_000 + "]" * 50_000
    write_jsonl(src / f"{SID}.jsonl", ["{" + '"a":' * 1 + deep + "}" + deep, user(uid(1), None, "hello")])
    result = batch.convert([src], out)
    assert result.rejected_lines == 1
    assert catalog_count(out) == 1


def test_a_git_repository_is_an_error_that_names_what_was_looked_for(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "README.md").write_text("hi")
    with pytest.raises(SourceError, match=r"no transcripts found in .*repo.*is a Git repository"):
        batch.convert([repo], tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- internal errors ----------------------------------------------------------------------------------


def test_an_internal_error_says_so_saves_the_traceback_and_exits_2(src, out, capsys, monkeypatch, tmp_path):
    from batch.cli import main

    two_sessions(src)
    monkeypatch.setattr("batch.formats.claude_code.converter._narrow", lambda *args: 1 / 0)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main(["convert", str(src), "--out", str(out), "-q"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert len(err.splitlines()) == 1 and err.startswith("Error: internal error in asr-batch")
    assert "ZeroDivisionError" in err and "Traceback" not in err
    (saved,) = tmp_path.glob("asr-batch-error-*.txt")
    assert str(saved) in err and "ZeroDivisionError" in saved.read_text()
    assert not out.exists() and run_folders(out) == []
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "convert", str(src), "--out", str(out), "-q"])


def test_an_output_may_sit_in_a_repositorys_working_tree_but_not_in_its_git_folder(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with pytest.raises(SourceError, match="no Entire checkpoints found"):  # not refused as an overlap
        batch.convert([repo], repo / "asr-out")
    with pytest.raises(OutputError, match="is inside the input"):
        batch.convert([repo], repo / ".git" / "asr-out")


def test_a_full_disk_is_one_error_line_and_leaves_the_previous_output(src, out, capsys, monkeypatch):
    import errno

    import pyarrow.parquet as pq

    from batch.cli import main

    two_sessions(src)
    batch.convert([src], out)
    before = tree(out)

    def full(where, schema, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(where))

    monkeypatch.setattr(pq, "ParquetWriter", full)
    with pytest.raises(SystemExit) as exc:
        # --full: over an unchanged input, an incremental run would write no Parquet at all
        main(["convert", str(src), "--out", str(out), "-q", "--full"])
    err = capsys.readouterr().err
    assert exc.value.code == 1
    assert len(err.splitlines()) == 1 and err.startswith("Error: cannot write (") and "No space left on device" in err
    assert tree(out) == before and run_folders(out) == []
