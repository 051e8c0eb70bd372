"""Incremental re-runs over Git repositories of Entire checkpoints: a session group whose blobs and
metadata did not change is reused, and the output equals a full conversion, table by table and row by row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pygit2
import pytest
from polars.testing import assert_frame_equal

import batch
from batch.cli import _summary
from batch.formats import entire_checkpoint
from batch.schema import TABLES
from batch.version import ARCHIVE_FORMAT, VERSION
from conftest import SID, assert_same_as_full, read_manifest, read_tables, sorted_rows, timeless, uid, user, write_jsonl
from conftest import assert_tables_equal
from entire_repos import GEMINI, S1, S2, S3, S4, SUBAGENT, WHOLE, build_scenario, meta, root_meta, sha256

V1 = "refs/heads/entire/checkpoints/v1"
CODEX_BARE = "019dc116-c183-74f3-8f98-b4e5bd8eddfa"  # b5a37dc3d0fe: Codex, full.jsonl only, usage from metadata
S5 = "55555555-5555-4555-8555-555555555555"
# one session group per session build_scenario writes: S1's older checkpoint and its subagent are in S1's
# group, the two Codex sessions with transcript.jsonl are named by their metadata, the corrupt one by its folder
GROUPS = {S1, S2, S3, S4, GEMINI, CODEX_BARE, "019f9261-846e-7fc0-b843-e0464227f290",
          "01a082cd-8bed-71c2-89f1-161a92f4ae0b", "f0f0f0f0f0f0/0"}
GROWN = WHOLE + json.dumps({"type": "user", "sessionId": S1, "uuid": "00000000-0000-4000-8000-000000000009",
                            "message": {"role": "user", "content": "one more line"}}).encode() + b"\n"
NEW_SESSION = b"\n".join(
    json.dumps({"type": "user", "sessionId": S5, "uuid": f"00000000-0000-4000-8000-00000000005{i}",
                "message": {"role": "user", "content": f"new session {i}"}}).encode()
    for i in range(2)
) + b"\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_scenario(tmp_path_factory.mktemp("entire"))["work"]


@pytest.fixture
def repo(built, tmp_path) -> Path:
    # a copy each test may add commits to; the folder keeps its name, which the outputs show
    copy = tmp_path / "src" / built.name
    shutil.copytree(built, copy, symlinks=True)
    return copy


def add_commit(repo: Path, ref: str, files: dict[str, bytes], message: str, *, when: int) -> str:
    """A commit on `ref` whose tree is its tip's tree with `files` (tree path -> bytes) added or replaced."""
    git = pygit2.Repository(str(repo))
    tip = git.references[ref].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(tip.tree)
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, git.create_blob(data), pygit2.enums.FileMode.BLOB))
    signature = pygit2.Signature("Test", "test@example.invalid", when, 0)
    return str(git.create_commit(ref, signature, signature, message, index.write_tree(git), [tip.id]))


def new_checkpoints(repo: Path) -> None:
    """One commit on entire/checkpoints/v1: a newer checkpoint of S1 (one more line, its subagent again)
    and a checkpoint of a new session S5."""
    cid, base = "c0ffee000002", "c0/ffee000002"
    add_commit(repo, V1, {
        f"{base}/metadata.json": root_meta(cid, ["0"], base=base),
        f"{base}/0/metadata.json": meta(session_id=S1, checkpoint_id=cid, agent="Claude Code",
                                        created_at="2026-03-01T09:00:00Z", checkpoint_transcript_start=9),
        f"{base}/0/full.jsonl": GROWN,
        f"{base}/0/content_hash.txt": sha256(GROWN).encode(),
        f"{base}/tasks/toolu_01ABC/agent-a1b2.jsonl": SUBAGENT,
        "5e/5e5e5e5e5e/metadata.json": root_meta("5e5e5e5e5e5e", ["0"], base="5e/5e5e5e5e5e"),
        "5e/5e5e5e5e5e/0/metadata.json": meta(session_id=S5, agent="Claude Code", created_at="2026-03-02T09:00:00Z"),
        "5e/5e5e5e5e5e/0/full.jsonl": NEW_SESSION,
        "5e/5e5e5e5e5e/0/content_hash.txt": sha256(NEW_SESSION).encode(),
    }, "Checkpoint: c0ffee000002, 5e5e5e5e5e5e", when=1_772_355_600)


@pytest.mark.parametrize("batch_bytes", [1, 48 << 20], ids=["group_per_batch", "one_batch"])
@pytest.mark.parametrize("all_checkpoints", [False, True], ids=["newest", "all_checkpoints"])
def test_nothing_changed_reuses_every_group_and_the_final_stage(repo, tmp_path, batch_bytes, all_checkpoints):
    out = tmp_path / "out"
    kw = {"batch_bytes": batch_bytes, "all_checkpoints": all_checkpoints}
    first = batch.convert([repo], out, **kw)
    groups = first.manifest["reuse"]["session_groups_converted"]
    assert groups == len(GROUPS) and first.manifest["entire"]["source_losses"]  # sessions of every kind, and losses
    result = batch.convert([repo], out, **kw)
    summary = assert_same_as_full(repo, out, tmp_path, **kw)
    assert summary == {
        "previous_output": True, "session_groups_reused": groups, "session_groups_converted": 0,
        "inputs_reused": result.inputs, "inputs_converted": 0, "verified": False, "final_stage": "reused",
    }
    # choosing the other checkpoints converts everything again
    batch.convert([repo], out, batch_bytes=batch_bytes, all_checkpoints=not all_checkpoints)
    summary = assert_same_as_full(repo, out, tmp_path, batch_bytes=batch_bytes, all_checkpoints=not all_checkpoints)
    assert (summary["session_groups_reused"], summary["final_stage"]) == (0, "run")


@pytest.mark.parametrize("batch_bytes", [1, 48 << 20], ids=["group_per_batch", "one_batch"])
@pytest.mark.parametrize("all_checkpoints", [False, True], ids=["newest", "all_checkpoints"])
def test_new_checkpoints_convert_only_their_sessions(repo, tmp_path, batch_bytes, all_checkpoints):
    out = tmp_path / "out"
    kw = {"batch_bytes": batch_bytes, "all_checkpoints": all_checkpoints}
    groups = batch.convert([repo], out, **kw).manifest["reuse"]["session_groups_converted"]
    new_checkpoints(repo)
    batch.convert([repo], out, **kw)
    summary = assert_same_as_full(repo, out, tmp_path, **kw)
    # S1 has a newer checkpoint, S5 is new; the other groups are reused (hard-linked or carved out of
    # the batch S1 shared with them), though the branch tip every checkpoint is read from moved
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 2)
    assert summary["final_stage"] == "run"
    rows = read_tables(out)["sessions"].filter(pl.col("session_key") == S1)
    assert json.loads(rows.get_column("meta")[0]) == {"io.entire/checkpoint": "c0ffee000002"}
    assert read_tables(out)["sessions"].filter(pl.col("session_key") == S5).height == 1
    # the next run reuses everything again, the final stage included
    batch.convert([repo], out, **kw)
    summary = assert_same_as_full(repo, out, tmp_path, **kw)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups + 1, 0)
    assert summary["final_stage"] == "reused"


def test_a_moved_branch_tip_reuses_every_group_and_shows_the_new_commit(repo, tmp_path):
    out = tmp_path / "out"
    groups = batch.convert([repo], out).manifest["reuse"]["session_groups_converted"]
    # a commit that changes no checkpoint: every blob stays, the commit they are read from is another
    tip = add_commit(repo, V1, {"README.md": b"checkpoints\n"}, "Add a readme", when=1_772_355_600)
    batch.convert([repo], out)
    summary = assert_same_as_full(repo, out, tmp_path)  # the manifest's provenance included
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups, 0)
    assert summary["final_stage"] == "run"  # the checkpoints table shows the commit each checkpoint is read from
    commits = {p["commit_id"] for i in read_manifest(out)["inputs"] for p in i.get("provenance", []) if p["ref"] == V1}
    assert commits == {tip}


def test_a_new_trailer_runs_the_final_stage_only(repo, tmp_path):
    out = tmp_path / "out"
    groups = batch.convert([repo], out).manifest["reuse"]["session_groups_converted"]
    add_commit(repo, "refs/heads/main", {"README.md": b"four\n"}, "Four\n\nEntire-Checkpoint: d00d00d00d00\n",
               when=1_772_355_600)
    batch.convert([repo], out)
    summary = assert_same_as_full(repo, out, tmp_path)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups, 0)
    assert summary["final_stage"] == "run"


@pytest.mark.parametrize("change", ["metadata", "content_hash", "prompt", "older_checkpoint", "older_usage"])
def test_a_changed_blob_of_a_session_converts_that_session(repo, tmp_path, change):
    out = tmp_path / "out"
    groups = batch.convert([repo], out).manifest["reuse"]["session_groups_converted"]
    base = "c0/ffee000001/0"
    if change == "metadata":  # the newest checkpoint's metadata: agent, model, token usage
        files = {f"{base}/metadata.json": meta(session_id=S1, checkpoint_id="c0ffee000001", agent="Claude Code",
                                               created_at="2026-01-14T09:00:00Z", checkpoint_transcript_start=6,
                                               model="claude-opus-4-5")}
    elif change == "content_hash":  # the transcript no longer matches its hash: a loss, known from the blob ID
        files = {f"{base}/content_hash.txt": sha256(b"another transcript").encode()}
    elif change == "prompt":  # read by load_session: its blob is part of the unit's input
        files = {f"{base}/prompt.txt": b"first prompt\n\n---\n\nanother second prompt"}
    elif change == "older_checkpoint":  # an older checkpoint of S1 (not converted by default) whose metadata changes
        files = {"4c/02af2759b6/0/metadata.json": meta(session_id=f"2026-01-10-{S1}", agent="Claude Code",
                                                      created_at="2026-01-10T00:00:00Z")}
    else:  # a new older checkpoint of a Codex session without transcript: one more usage summary of its metadata
        files = {"0c/0dec000001/metadata.json": root_meta("0c0dec000001", ["0"], base="0c/0dec000001"),
                 "0c/0dec000001/0/metadata.json": meta(session_id=CODEX_BARE, agent="Codex",
                                                       created_at="2026-04-01T00:00:00Z",
                                                       token_usage={"input_tokens": 10, "output_tokens": 2})}
    add_commit(repo, V1, files, f"Change {change}", when=1_772_355_600)
    batch.convert([repo], out)
    summary = assert_same_as_full(repo, out, tmp_path)
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups - 1, 1)
    if change == "older_usage":
        usage = read_tables(out)["usage_summaries"].filter(pl.col("session_key") == CODEX_BARE)
        assert usage.get_column("input_uncached_tokens").to_list() == [10, 104879]


def test_verify_over_an_unchanged_repository_gives_the_full_output(repo, tmp_path):
    out = tmp_path / "out"
    groups = batch.convert([repo], out).manifest["reuse"]["session_groups_converted"]
    batch.convert([repo], out, verify=True)  # the reused sessions' blobs are read and hashed again
    summary = assert_same_as_full(repo, out, tmp_path)
    # transcript.jsonl sessions included: their inputs are hashed as their unit reads them
    assert summary["verified"]
    assert (summary["session_groups_reused"], summary["session_groups_converted"]) == (groups, 0)


def test_the_fingerprint_changes_with_the_sessions_blobs_only(repo):
    before = {u.owner: u.fingerprint for u in entire_checkpoint.discover(repo).units}
    assert all(before.values())
    new_checkpoints(repo)
    after = {u.owner: u.fingerprint for u in entire_checkpoint.discover(repo).units}
    assert {o for o in after if after[o] != before.get(o)} == {S1, S5}
    # the same session read with --all-checkpoints is another input
    combined = {u.owner: u.fingerprint for u in entire_checkpoint.discover(repo, combine=True).units}
    assert all(combined[o] != after[o] for o in after)


def test_repository_and_files_of_one_session_share_a_group(repo, tmp_path):
    # a Claude Code file of S1 beside its checkpoints: one group, reused while neither changes
    files = tmp_path / "projects" / "-p"
    files.mkdir(parents=True)
    (files / f"{S1}.jsonl").write_bytes(WHOLE)
    out = tmp_path / "out"
    groups = batch.convert([repo, files.parent], out).manifest["reuse"]["session_groups_converted"]
    batch.convert([repo, files.parent], out)
    full = tmp_path / "full"
    batch.convert([repo, files.parent], full, full=True)
    assert read_manifest(out)["reuse"]["session_groups_reused"] == groups
    got, want = read_tables(out), read_tables(full)
    for t in TABLES:
        assert_frame_equal(sorted_rows(timeless(got[t.name])), sorted_rows(timeless(want[t.name])), check_row_order=True)
    new_checkpoints(repo)
    batch.convert([repo, files.parent], out)
    assert read_manifest(out)["reuse"]["session_groups_converted"] == 2
    shutil.rmtree(full)
    batch.convert([repo, files.parent], full, full=True)
    got, want = read_tables(out), read_tables(full)
    for t in TABLES:
        assert_frame_equal(sorted_rows(timeless(got[t.name])), sorted_rows(timeless(want[t.name])), check_row_order=True)


def other_version(out: Path) -> None:
    """Make `out` an output whose reuse state another version wrote (of other table columns)."""
    state = json.loads((out / "_reuse.json").read_text())
    state["tables"] = "0" * 16
    (out / "_reuse.json").write_text(json.dumps(state))


def test_an_output_of_another_version_carries_its_entire_sessions_from_its_copy_of_the_repository(repo, tmp_path):
    """The output holds the Git objects its Entire sessions were read from (git_refs, git_objects): with
    the repository gone, an upgrade converts them again from that copy, and the tables are those of a
    conversion of the repository; so is the output converted into a new folder; the next run reuses all."""
    sample = tmp_path / "projects" / "-p"
    write_jsonl(sample / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    want = tmp_path / "want"
    batch.convert([repo, sample.parent], want)
    out = tmp_path / "out"
    batch.convert([repo, sample.parent], out)
    held = read_tables(out)["git_objects"]
    assert set(held["read_as"]) == {"storage", "trailer"} and held["object_id"].n_unique() == held.height
    shutil.rmtree(repo)  # the repository is gone
    other_version(out)
    result = batch.convert([sample.parent], out)
    assert result.manifest["carried"]["not_carried"] == [] and result.manifest["carried"]["inexact"] == []
    assert set(result.manifest["carried"]["from"][0]["session_groups"]) == GROUPS
    assert result.manifest["carried"]["from"][0]["repositories"] == [repo.name]
    assert f"the Git repository {repo.name} rebuilt from its copy" in _summary(result)
    assert result.manifest["entire"]["repositories"][0]["rebuilt_from"] == str(out.resolve())
    assert_tables_equal(out, want)
    sessions = read_tables(out)["sessions"]
    assert not sessions.filter(pl.col("session_key").is_in(list(GROUPS)))["source_present"].any()
    assert batch.convert([sample.parent], out).manifest["reuse"]["session_groups_converted"] == 0
    assert_tables_equal(out, want)
    rebuilt = tmp_path / "rebuilt"
    batch.convert([out], rebuilt)
    assert_tables_equal(rebuilt, want)


def test_what_the_output_holds_of_a_repository_follows_it_and_is_kept_when_it_is_not_given(repo, tmp_path):
    out = tmp_path / "out"
    batch.convert([repo], out)
    part = next((out / "git_objects").glob("part-*.parquet"))
    inode = part.stat().st_ino
    batch.convert([repo], out)  # the same references and trailers: the same objects, linked
    assert part.stat().st_ino == inode
    new_checkpoints(repo)
    batch.convert([repo], out)
    tip = str(pygit2.Repository(str(repo)).references[V1].target)
    refs = read_tables(out)["git_refs"]
    assert refs.filter(pl.col("ref") == V1)["object_id"].to_list() == [tip]
    assert tip in set(read_tables(out)["git_objects"]["object_id"])
    held = read_tables(out)["git_objects"]
    sample = tmp_path / "projects" / "-p"
    write_jsonl(sample / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    batch.convert([sample.parent], out)  # the repository not given: what the output holds of it is kept
    assert_frame_equal(sorted_rows(read_tables(out)["git_objects"]), sorted_rows(held))


def test_an_output_without_a_copy_of_the_repository_keeps_its_entire_sessions_as_written(repo, tmp_path):
    """An output of a version that kept no copy of the repositories it read (no git_objects) holds Entire
    sessions without their blobs: a run of another version that no longer gives the repository carries
    them as that output wrote them (batch/incremental/as_written.py); given again, they are converted."""
    out = tmp_path / "out"
    sample = tmp_path / "projects" / "-p"
    write_jsonl(sample / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    batch.convert([repo, sample.parent], out)
    written = read_tables(out)
    other_version(out)
    manifest = read_manifest(out)
    for table in ("git_refs", "git_objects"):  # as an output written before they existed
        shutil.rmtree(out / table)
        manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith(f"{table}/")}
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = batch.convert([sample.parent], out)
    assert {e["session_group"] for e in result.manifest["as_written"]} == GROUPS
    assert f"9 sessions as asr-batch {VERSION} (archive format {ARCHIVE_FORMAT}) wrote them" in _summary(result)
    for t in TABLES:  # every row as it was: this version wrote them, the other in name only
        if t.stage != "held":
            got, want = (timeless(f).drop("source_present", strict=False) for f in (read_tables(out)[t.name], written[t.name]))
            assert_frame_equal(sorted_rows(got), sorted_rows(want), check_row_order=True)
    # the repository given again: no session of the output is left without its source (one named by
    # its checkpoint folder, `<id>/<n>`, included), every session converted, none lost
    result = batch.convert([repo, sample.parent], out)
    assert result.manifest["as_written"] == []
    full = tmp_path / "full"
    batch.convert([repo, sample.parent], full)
    assert_tables_equal(out, full)


def test_a_damaged_copy_of_a_repository_is_named_not_an_internal_error(repo, tmp_path):
    """The output's copy of a repository truncated (a disk error, a partial copy) while the repository is
    gone: its sessions cannot be converted again, and the run over an output of another version carries
    them as it wrote them, naming them, never with an internal error."""
    out = tmp_path / "out"
    sample = tmp_path / "projects" / "-p"
    write_jsonl(sample / f"{SID}.jsonl", [user(uid(1), None, "hello")])
    batch.convert([repo, sample.parent], out)
    sessions = read_tables(out)["sessions"]
    shutil.rmtree(repo)
    other_version(out)
    part = next((out / "git_objects").glob("part-*.parquet"))
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    result = batch.convert([sample.parent], out)
    assert {e["session_group"] for e in result.manifest["as_written"]} == GROUPS
    assert_frame_equal(sorted_rows(timeless(read_tables(out)["sessions"]).drop("source_present")),
                       sorted_rows(timeless(sessions).drop("source_present")), check_row_order=True)
