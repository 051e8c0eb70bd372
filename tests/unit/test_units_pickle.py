"""A unit of work can be described to another process: every unit the sources give pickles, and the
copy loads the same streams and frames as the unit itself (the ground for running batches as tasks
in worker processes)."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from pathlib import Path

import duckdb
from conftest import FIXTURES, SAMPLE
from entire_repos import build_scenario

from batch.formats import entire_checkpoint
from batch.run.task import Task
from batch.sources import registry
from batch.sources.base import fingerprint_of
from batch.sources.claude_code import NO_TOOL_RESULTS, ToolResults, discover


def loaded(unit) -> tuple:
    """What loading the unit gives: each stream's name, kind, key and bytes' SHA-256, and the frames."""
    got = unit.load()
    streams = []
    for s in got.streams:
        with s.open() as fh:
            streams.append((s.name, s.stream_kind, s.session_key, s.producer_source, hashlib.sha256(fh.read()).hexdigest()))
    frames = {table: [f.to_dicts() for f in frames] for table, frames in sorted(got.frames.items())}
    return sorted(streams), frames, got.inputs


def test_claude_code_units_go_to_another_process():
    files = discover([SAMPLE]).files  # (its folder is there while it is)
    found = files.units()
    assert len(found) == len({u.owner for u in found}) > 1
    for unit in found:
        copy = pickle.loads(pickle.dumps(unit))
        # (the fingerprint is told from the unit's rows: the copy tells the same)
        assert (copy.owner, copy.size) == (unit.owner, unit.size)
        assert fingerprint_of(copy.fingerprint) == fingerprint_of(unit.fingerprint)
        assert loaded(copy) == loaded(unit)


def test_entire_units_go_to_another_process(tmp_path: Path):
    repo = build_scenario(tmp_path)["work"]
    found = entire_checkpoint.discover(repo).units
    assert found
    for unit in found:
        copy = pickle.loads(pickle.dumps(unit))
        assert (copy.owner, copy.size, copy.fingerprint) == (unit.owner, unit.size, unit.fingerprint)
        assert loaded(copy) == loaded(unit)


def test_units_of_an_earlier_output_go_to_another_process():
    from batch.sources import archive

    found = archive.discover(FIXTURES / "outputs" / "580ae78").units
    assert len(found) == len({u.owner for u in found}) > 1
    for unit in found:
        copy = pickle.loads(pickle.dumps(unit))
        assert (copy.owner, copy.size, copy.fingerprint) == (unit.owner, unit.size, unit.fingerprint)
        assert loaded(copy) == loaded(unit)


def test_a_task_is_given_the_tool_results_file_not_the_names(tmp_path: Path):
    archive = tmp_path / "projects"
    shutil.copytree(SAMPLE / "-Users-demo-viewer", archive / "-Users-demo-viewer")
    session = archive / "-Users-demo-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a" / "tool-results"
    session.mkdir(parents=True)
    names = [f"toolu_{n:05d}.txt" for n in range(2000)]
    for name in names:
        (session / name).write_text("output")
    found = registry.discover([archive], [], combine=False, folder=tmp_path / "run")
    # the key is the one earlier runs stored: the SHA-256 of the sorted names, a line each
    assert found.tool_results.key == hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()
    con = duckdb.connect()
    found.tool_results.register(con, "names")
    assert [r[0] for r in con.sql("select name from names order by name").fetchall()] == sorted(names)
    # a task pickles the file's path, whatever the number of names
    task = Task("p", tuple(found.units), tmp_path / "run", found.tool_results)
    assert len(pickle.dumps(task)) < len(pickle.dumps(task.units)) + 1000
    copy = pickle.loads(pickle.dumps(task))
    assert copy.tool_results == found.tool_results


def test_no_tool_results_read_as_none():
    con = duckdb.connect()
    NO_TOOL_RESULTS.register(con, "names")
    assert con.sql("select count(*) from names").fetchall() == [(0,)]
    assert NO_TOOL_RESULTS.key == hashlib.sha256(b"").hexdigest()


def test_tool_results_names_of_any_characters_read_back_the_same(tmp_path: Path):
    names = {"toolu_01.txt", "it's.txt", 'a "quoted", name.txt', "two\nlines.txt", "caf\u00e9 \\xff.txt", "{}"}
    # given in two sorted lists that share a name: each name once
    held = ToolResults.write(tmp_path, sorted(names), sorted(list(names)[:2]))
    assert held.key == hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()
    assert list(ToolResults.read(held.path)) == sorted(names)
    con = duckdb.connect()
    held.register(con, "names")
    assert sorted(r[0] for r in con.sql("select name from names").fetchall()) == sorted(names)


def test_discovery_names_each_tool_result_once_as_shown(tmp_path: Path):
    """The names of the tool-results/ files, from every session and source, sorted, each once: a name
    that is not UTF-8 with its bytes escaped, a name holding a newline kept whole."""
    archive = tmp_path / "projects"
    shutil.copytree(SAMPLE / "-Users-demo-viewer", archive / "-Users-demo-viewer")
    for session, names in {"s1": [b"a.txt", b"two\nlines.txt", b"caf\xff.txt"], "s2": [b"a.txt", b"b.txt"]}.items():
        folder = archive / "-Users-demo-viewer" / session / "tool-results"
        folder.mkdir(parents=True)
        for name in names:
            (Path(os.fsdecode(os.fsencode(folder) + b"/" + name))).write_text("output")
    (tmp_path / "beside" / "x" / "tool-results").mkdir(parents=True)
    (tmp_path / "beside" / "x" / "tool-results" / "c.txt").write_text("output")
    # a link to a file already found: skipped as the same file, its name not a tool result's
    os.symlink(archive / "-Users-demo-viewer" / "s2" / "tool-results" / "b.txt",
               tmp_path / "beside" / "x" / "tool-results" / "linked.txt")
    found = registry.discover([archive, tmp_path / "beside"], [], combine=False, folder=tmp_path / "run")
    expected = sorted({"a.txt", "two\nlines.txt", "caf\\xff.txt", "b.txt", "c.txt"})
    assert list(ToolResults.read(found.tool_results.path)) == expected
    assert found.tool_results.key == hashlib.sha256("\n".join(expected).encode()).hexdigest()
