"""Entire checkpoints read from real Git repositories built by tests/entire_repos.py."""

from __future__ import annotations

import subprocess

import pytest

from batch.errors import SourceError
from batch.sources.entire import (
    CommitLink,
    Provenance,
    iter_units,
    load_session,
    scan_checkpoints,
    scan_trailers,
    select_sessions,
)
from batch.sources.git import is_repository, open_repository
from entire_repos import (
    CHUNKS,
    CODEX_FULL,
    GEMINI,
    GEMINI_ETF,
    LEGACY_FULL,
    MISMATCH_FULL,
    MISSING_FULL,
    S1,
    S2,
    S3,
    S4,
    SUBAGENT,
    ULID,
    WHOLE,
    blob_id,
    build_scenario,
    commit,
    fixture,
    git,
    init,
    meta,
    root_meta,
)

V1 = "refs/heads/entire/checkpoints/v1"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return build_scenario(tmp_path_factory.mktemp("entire"))


@pytest.fixture(scope="module")
def repo(scenario):
    return open_repository(scenario["work"])


@pytest.fixture(scope="module")
def scan(repo):
    return scan_checkpoints(repo)


@pytest.fixture(scope="module")
def units(repo):
    """The default selection, keyed by (checkpoint id, folder)."""
    return {(u.checkpoint_id, u.entry.folder): u for u in iter_units(repo)}


def test_repository_detection(scenario, tmp_path):
    assert is_repository(scenario["work"])
    assert is_repository(scenario["work"] / ".git")
    assert is_repository(scenario["bare"])
    assert is_repository(scenario["mirror"])
    inside = scenario["work"] / "sub"
    inside.mkdir(exist_ok=True)
    assert not is_repository(inside)  # a folder inside a working tree is read as files
    assert not is_repository(tmp_path)
    with pytest.raises(SourceError, match="not a Git repository. Pass the root of a working tree"):
        open_repository(tmp_path)


def test_checkpoints_are_routed_between_refs_and_branches(scan):
    placed = {c.checkpoint_id: (c.location.ref, c.location.base, c.shadowed) for c in scan.checkpoints}
    assert placed == {
        ULID: (f"refs/entire/checkpoints/BH/{ULID}", "", []),
        # the same ID on the branch and its remote-tracking copy (identical): the local branch is read
        "4c02af2759b6": (V1, "4c/02af2759b6", ["refs/remotes/origin/entire/checkpoints/v1"]),
        "9e9e9e9e9e9e": (V1, "9e/9e9e9e9e9e", []),
        # a hex ID both under its own ref and on the branch: the ref is read
        "b5a37dc3d0fe": ("refs/entire/checkpoints/fe/b5a37dc3d0fe", "", [V1]),
        "bbef1c2a76a9": (V1, "bb/ef1c2a76a9", []),
        "c0ffee000001": (V1, "c0/ffee000001", []),
        "d00d00d00d00": (V1, "d0/0d00d00d00", []),
        "e0e0e0e0e0e0": (V1, "e0/e0e0e0e0e0", []),
        "f0f0f0f0f0f0": (V1, "f0/f0f0f0f0f0", []),
    }
    # refs/entire/checkpoints/v2/main is read as v2 storage: its root metadata.json is no checkpoint
    assert scan.skipped == [
        ("refs/entire/checkpoints/zz/c0ffee000001", "not a per-checkpoint ref: the shard is not the ID's last two characters"),
        (f"{V1}:_branches", "not a checkpoint shard folder"),
        ("refs/entire/checkpoints/v2/main:metadata.json", "not a checkpoint shard folder"),
    ]


def test_per_checkpoint_ref_is_read_at_its_tip(scenario, repo, scan):
    (checkpoint,) = [c for c in scan.checkpoints if c.checkpoint_id == ULID]
    tip = git(scenario["work"], "rev-parse", f"refs/entire/checkpoints/BH/{ULID}")
    assert checkpoint.location.commit_id == tip
    unit = load_session(repo, checkpoint.sessions[0])
    etf = fixture("v1branch_etf_codex.jsonl")
    assert unit.compact_transcript.data == etf  # written by the second commit only
    assert unit.compact_transcript.provenance == (
        Provenance("work", f"refs/entire/checkpoints/BH/{ULID}", tip, ULID, "0/transcript.jsonl", blob_id(etf)),
    )
    assert unit.prompt.data == b"fix the doctor"
    assert unit.transcript is None
    assert unit.entry.agent == "Codex"
    assert unit.entry.compact_transcript_start == 0
    assert unit.losses == []


def test_migrated_hex_checkpoint_under_a_ref(repo, scan):
    (checkpoint,) = [c for c in scan.checkpoints if c.checkpoint_id == "b5a37dc3d0fe"]
    # its summary keeps the v1 paths (/b5/a37dc3d0fe/N/...) and lists folder 1, which the tree lacks
    assert [s.folder for s in checkpoint.sessions] == ["0"]
    assert [(x.category, x.session, x.path) for x in checkpoint.losses] == [("missing_session_folder", "1", "1")]
    unit = load_session(repo, checkpoint.sessions[0])
    assert unit.transcript.data == CODEX_FULL
    assert unit.content_hash_ok is True
    assert [(x.category, x.detail) for x in unit.losses] == [
        ("unsupported_agent", "agent Codex: no native converter for its full.jsonl, and no transcript.jsonl"),
    ]


def test_newest_checkpoint_of_each_session_by_default(scan):
    chosen = [(s.session_key, s.checkpoint_id, s.folder) for s in select_sessions(scan)]
    assert chosen == [
        ("019dc116-c183-74f3-8f98-b4e5bd8eddfa", "b5a37dc3d0fe", "0"),
        ("019f9261-846e-7fc0-b843-e0464227f290", "bbef1c2a76a9", "0"),
        ("01a082cd-8bed-71c2-89f1-161a92f4ae0b", ULID, "0"),
        (S2, "d00d00d00d00", "0"),
        (S3, "e0e0e0e0e0e0", "0"),
        (S4, "9e9e9e9e9e9e", "0"),
        # the legacy date-prefixed session ID 2026-01-13-<S1> is the same session as S1
        (S1, "c0ffee000001", "0"),
        ("f0f0f0f0f0f0/0", "f0f0f0f0f0f0", "0"),  # no readable metadata: a session of its own
        (GEMINI, "c0ffee000001", "2"),
    ]


def test_combined_checkpoints_keep_their_transcript_starts(scan):
    combined = [s for s in select_sessions(scan, combine=True) if s.session_key == S1]
    assert [(s.checkpoint_id, s.session_id, s.transcript_start) for s in combined] == [
        ("4c02af2759b6", f"2026-01-13-{S1}", None),  # 2026-01-13T11:32:55+11:00, the older one
        ("c0ffee000001", S1, 6),
    ]
    assert len(select_sessions(scan, combine=True)) == len(select_sessions(scan)) + 1


def test_chunks_are_joined_in_order_and_the_hash_verified(units):
    unit = units[("c0ffee000001", "0")]
    assert unit.transcript.data == b"\n".join(CHUNKS)
    assert unit.transcript.data == WHOLE[:-1]  # the last chunk lost the final newline the hash covers
    assert [p.path for p in unit.transcript.provenance] == [
        "c0/ffee000001/0/full.jsonl", "c0/ffee000001/0/full.jsonl.001", "c0/ffee000001/0/full.jsonl.002",
    ]
    assert [p.blob_id for p in unit.transcript.provenance] == [blob_id(c) for c in CHUNKS]
    assert unit.content_hash_ok is True
    assert unit.native_format == "claude-code-jsonl"
    assert unit.prompt.data == b"first prompt\n\n---\n\nsecond prompt"
    assert unit.losses == []


def test_subagent_task_belongs_to_its_session(units):
    unit = units[("c0ffee000001", "0")]
    (task,) = unit.tasks
    assert task.tool_use_id == "toolu_01ABC"
    assert [b.data for b in task.transcripts] == [SUBAGENT]
    assert task.transcripts[0].provenance[0].path == "c0/ffee000001/tasks/toolu_01ABC/agent-a1b2.jsonl"
    assert task.task == {"tool_use_id": "toolu_01ABC", "agent_id": "a1b2", "session_id": S1}
    assert units[("c0ffee000001", "2")].tasks == []


def test_legacy_checkpoint_content_is_tolerated(repo, scan):
    (older,) = [s for s in select_sessions(scan, combine=True) if s.checkpoint_id == "4c02af2759b6"]
    unit = load_session(repo, older)
    assert unit.transcript.data == LEGACY_FULL
    assert unit.content_hash_ok is True  # the real content_hash.txt Entire wrote for this file
    assert unit.native_format == "claude-code-jsonl"  # no agent in legacy metadata: read from the lines
    assert unit.context.data == b"# Session Context\n"
    assert [(b.provenance[0].path, b.data) for b in unit.unknown] == [("4c/02af2759b6/0/notes.txt", b"an unknown file")]
    (task,) = unit.tasks
    assert task.tool_use_id == "toolu_LEGACY"
    assert task.transcripts == [] and task.task is None
    assert [b.provenance[0].path for b in task.other] == [
        "4c/02af2759b6/tasks/toolu_LEGACY/checkpoint.json",
        "4c/02af2759b6/tasks/toolu_LEGACY/checkpoints/001-toolu_LEGACY.json",
    ]
    assert unit.losses == []


def test_hash_mismatch_is_a_declared_loss(units):
    unit = units[("d00d00d00d00", "0")]
    assert unit.entry.session_key == S2
    assert unit.transcript.data == MISMATCH_FULL  # kept, its integrity unverified
    assert unit.content_hash_ok is False
    (loss,) = unit.losses
    assert (loss.category, loss.checkpoint_id, loss.session, loss.path) == (
        "hash_mismatch", "d00d00d00d00", "0", "d0/0d00d00d00/0/content_hash.txt",
    )
    assert "sha256:" + __import__("hashlib").sha256(MISMATCH_FULL).hexdigest() in loss.detail


def test_missing_blob_is_a_declared_loss(scenario, units):
    unit = units[("e0e0e0e0e0e0", "0")]
    assert unit.entry.session_key == S3
    assert unit.transcript is None
    assert [(x.category, x.checkpoint_id, x.session, x.path) for x in unit.losses] == [
        ("missing_blob", "e0e0e0e0e0e0", "0", "e0/e0e0e0e0e0/0/full.jsonl"),
    ]
    assert blob_id(MISSING_FULL) in unit.losses[0].detail
    # the bare clone was made before the object was deleted: there it is read
    bare = {(u.checkpoint_id, u.entry.folder): u for u in iter_units(open_repository(scenario["bare"]))}
    assert bare[("e0e0e0e0e0e0", "0")].transcript.data == MISSING_FULL
    assert bare[("e0e0e0e0e0e0", "0")].losses == []


def test_corrupt_metadata_is_a_declared_loss(units):
    unit = units[("f0f0f0f0f0f0", "0")]
    assert unit.entry.metadata is None
    assert [(x.category, x.path) for x in unit.losses] == [("corrupt_metadata", "f0/f0f0f0f0f0/0/metadata.json")]
    assert unit.losses[0].detail == "not a JSON object: '{\"session_id\": \"x\",'"


def test_codex_and_gemini_with_and_without_transcript_jsonl(units):
    codex = units[("bbef1c2a76a9", "0")]
    assert (codex.native_format, codex.compact_transcript.data, codex.losses) == (
        None, fixture("v1branch_etf_codex.jsonl"), [],
    )
    gemini = units[("9e9e9e9e9e9e", "0")]
    assert (gemini.native_format, gemini.compact_transcript.data, gemini.losses) == (None, GEMINI_ETF, [])
    bare_gemini = units[("c0ffee000001", "2")]
    assert bare_gemini.compact_transcript is None
    assert bare_gemini.transcript.data == fixture("v1branch_full_gemini_cli_single_json_object.jsonl")
    assert [(x.category, x.detail) for x in bare_gemini.losses] == [
        ("unsupported_agent", "agent Gemini CLI: no native converter for its full.jsonl, and no transcript.jsonl"),
    ]
    # Codex without transcript.jsonl: test_migrated_hex_checkpoint_under_a_ref


def test_trailers_of_every_branch_except_the_checkpoint_branch(scenario, repo):
    c = scenario["commits"]
    expected = sorted(
        [
            CommitLink(c["c1"], "4c02af2759b6", 0),
            CommitLink(c["c2"], "c0ffee000001", 0),
            CommitLink(c["c2"], ULID, 1),
            CommitLink(c["c3"], "0123456789ab", 0),  # names a checkpoint the repository does not hold
        ],
        key=lambda link: (link.commit_id, link.index),
    )
    assert scan_trailers(repo) == expected  # d00d00d00d00 is only in a checkpoint-branch commit
    assert scan_trailers(open_repository(scenario["bare"])) == expected


def test_bare_clone_and_mirror(scenario):
    bare = scan_checkpoints(open_repository(scenario["bare"]))
    # a bare clone copies branches, not refs/entire/*: the hex checkpoint is then read from the branch
    assert ULID not in {c.checkpoint_id for c in bare.checkpoints}
    (b5,) = [c for c in bare.checkpoints if c.checkpoint_id == "b5a37dc3d0fe"]
    assert (b5.location.ref, b5.shadowed) == (V1, [])
    mirror = scan_checkpoints(open_repository(scenario["mirror"]))
    assert ULID in {c.checkpoint_id for c in mirror.checkpoints}
    assert len(mirror.checkpoints) == len(bare.checkpoints) + 1


def test_no_process_is_started_per_object(repo, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the Git source started a process")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    assert len(list(iter_units(repo))) == 9
    assert len(scan_trailers(repo)) == 4


def test_absent_trees_are_declared_losses(tmp_path):
    work = init(tmp_path / "trees")
    commit(work, V1, {
        "a0/a0a0a0a0a0/metadata.json": root_meta("a0a0a0a0a0a0", ["0"], base="a0/a0a0a0a0a0"),
        "a0/a0a0a0a0a0/0/metadata.json": meta(session_id="session-with-absent-folder"),
        "a1/a1a1a1a1a1/metadata.json": meta(checkpoint_id="a1a1a1a1a1a1", note="absent checkpoint tree"),
    }, "checkpoints")
    for spec in (f"{V1}:a0/a0a0a0a0a0/0", f"{V1}:a1/a1a1a1a1a1"):
        oid = git(work, "rev-parse", spec)
        (work / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    scan = scan_checkpoints(open_repository(work))
    assert [(x.category, x.checkpoint_id, x.session, x.path) for x in scan.losses] == [
        ("missing_blob", "a1a1a1a1a1a1", None, "a1/a1a1a1a1a1"),  # checkpoint losses first, then sessions'
        ("missing_blob", "a0a0a0a0a0a0", "0", "a0/a0a0a0a0a0/0"),
    ]
    (unit,) = iter_units(open_repository(work))
    # the absent folder is the only loss: nothing claims what it held
    assert (unit.session_key, [x.category for x in unit.losses]) == ("a0a0a0a0a0a0/0", ["missing_blob"])


def test_a_repository_rebuilt_from_its_objects_is_scanned_as_the_original(scenario, repo, tmp_path):
    """The objects `held` keeps (every one under the scan's references, the trailer commits) written back
    as a bare repository give the same checkpoints, sessions, losses and trailers; an object whose
    bytes do not give its ID is refused; a `known` blob is not read again."""
    from batch.sources.entire import held, scan_trailers
    from batch.sources.git import raw_objects, write_repository

    trailers = sorted({link.commit_id for link in scan_trailers(repo)})
    refs = held.storage_refs(repo)
    objects = [(oid, kind, data) for piece in held.object_pieces(scenario["work"], "work", trailers)
               for oid, kind, data in zip(*(piece.column(c).to_pylist() for c in ("object_id", "kind", "data")))]
    assert {kind for _, kind, _ in objects} == {"commit", "tree", "blob"}
    # git's own IDs: the bytes of each object hash to its ID as git computes it
    some_blob = next((oid, data) for oid, kind, data in objects if kind == "blob")
    assert some_blob[0] == blob_id(some_blob[1])
    rebuilt = write_repository(tmp_path / "work", refs + [(f"refs/heads/trailer/{c}", c) for c in trailers], objects)
    again = open_repository(rebuilt)
    original, copy = scan_checkpoints(repo), scan_checkpoints(again)
    assert [(c.checkpoint_id, c.location.ref, c.location.commit_id, [s.session_key for s in c.sessions], c.losses)
            for c in copy.checkpoints] == [
        (c.checkpoint_id, c.location.ref, c.location.commit_id, [s.session_key for s in c.sessions], c.losses)
        for c in original.checkpoints]
    assert scan_trailers(again) == scan_trailers(repo)
    with pytest.raises(SourceError, match="other bytes"):
        write_repository(tmp_path / "bad", [], [(some_blob[0], "blob", some_blob[1] + b"!")])
    # a known blob comes without its bytes (not read); the tree naming it is still read
    listed = list(raw_objects(repo, [oid for _, oid in refs], below=True, known={some_blob[0]}))
    assert (some_blob[0], "blob", None) in listed
    assert all(data is not None for oid, _, data in listed if oid != some_blob[0])
