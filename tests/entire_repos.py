"""Build real Git repositories holding Entire checkpoints, with the `git` command (test set-up only)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "entire"
ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def git(repo: Path, *args: str, stdin: bytes | None = None, env: dict | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, check=True,
        env={**os.environ, **ENV, **(env or {})},
    )
    return done.stdout.decode().strip()


def init(repo: Path, *, bare: bool = False) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", *(["--bare"] if bare else []), "-b", "main", ".")
    return repo


def commit(repo: Path, ref: str, files: dict[str, bytes], message: str, *, parents: tuple[str, ...] = (),
           when: int = 1_767_225_600) -> str:
    """Write `files` (tree path -> bytes) as the whole tree of a new commit on `ref`; return its id."""
    index = repo / ".test-index"
    env = {"GIT_INDEX_FILE": str(index), "GIT_AUTHOR_DATE": f"{when} +0000", "GIT_COMMITTER_DATE": f"{when} +0000"}
    index.unlink(missing_ok=True)
    entries = []
    for path, data in sorted(files.items()):
        oid = git(repo, "hash-object", "-w", "--stdin", stdin=data)
        entries.append(f"100644 blob {oid}\t{path}")
    git(repo, "update-index", "--index-info", stdin=("\n".join(entries) + "\n").encode(), env=env)
    tree = git(repo, "write-tree", env=env)
    index.unlink()
    args = [a for p in parents for a in ("-p", p)]
    oid = git(repo, "commit-tree", tree, *args, "-m", message, env=env)
    git(repo, "update-ref", ref, oid)
    return oid


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def meta(**fields) -> bytes:
    return json.dumps(fields, indent=2).encode()


def root_meta(cid: str, folders: list[str], *, base: str, compact: tuple[str, ...] = ()) -> bytes:
    """A checkpoint summary listing its session folders with absolute tree paths."""
    prefix = f"/{base}/" if base else "/"
    sessions = []
    for f in folders:
        item = {"metadata": f"{prefix}{f}/metadata.json", "transcript": f"{prefix}{f}/full.jsonl",
                "content_hash": f"{prefix}{f}/content_hash.txt", "prompt": f"{prefix}{f}/prompt.txt"}
        if f in compact:
            item["compact_transcript"] = f"{prefix}{f}/transcript.jsonl"
        sessions.append(item)
    return meta(cli_version="0.8.42", checkpoint_id=cid, strategy="manual-commit", checkpoints_count=1,
                sessions=sessions)


# ---------------------------------------------------------------------------------------------
# The scenario repository the source tests read (see tests/fixtures/entire/README.md)

S1 = "5a3bb1c8-c3ce-466e-b487-24212cbf1da1"  # the legacy Claude Code session of the corpus
S2 = "22222222-2222-4222-8222-222222222222"
S3 = "33333333-3333-4333-8333-333333333333"
S4 = "44444444-4444-4444-8444-444444444444"
GEMINI = "f7633853-6663-4dbb-bbf4-6159afa29df8"  # sessionId inside the Gemini fixture
ULID = "01M228EVE8JJQ9J34JESFQX7BH"
LEGACY_FULL = fixture("v1branch_full_claude_code_native_legacy.jsonl")  # 6 lines, no final newline
EXTRA = [
    json.dumps({"type": "user", "sessionId": S1, "uuid": f"00000000-0000-4000-8000-00000000000{i}",
                "message": {"role": "user", "content": f"line {i}"}}).encode()
    for i in range(3)
]
# the whole transcript Entire hashed before chunking it into full.jsonl, .001 and .002
WHOLE = LEGACY_FULL + b"\n" + b"\n".join(EXTRA) + b"\n"
CHUNKS = [LEGACY_FULL, EXTRA[0] + b"\n" + EXTRA[1], EXTRA[2]]
SUBAGENT = b'{"type":"user","sessionId":"' + S1.encode() + b'","agentId":"a1b2","isSidechain":true}\n'
CODEX_FULL = b'{"timestamp":"2026-07-24T04:29:01.231Z","type":"session_meta","payload":{}}\n'
GEMINI_ETF = (
    b'{"v":1,"agent":"gemini","cli_version":"0.8.42","type":"user","ts":"2026-01-15T20:51:48.582Z",'
    b'"content":[{"text":"hello"}]}\n'
)
MISMATCH_FULL = b'{"type":"user","sessionId":"' + S2.encode() + b'","uuid":"u-1"}\n'
MISSING_FULL = b'{"type":"user","sessionId":"' + S3.encode() + b'","uuid":"u-missing-blob"}\n'


def build_scenario(base: Path) -> dict[str, Path]:
    """A working tree with a v1 branch, per-checkpoint refs and code commits; a bare clone and a mirror
    made before one loose blob of the working tree is deleted."""
    work = init(base / "work")
    v1 = "refs/heads/entire/checkpoints/v1"
    legacy = {
        "4c/02af2759b6/metadata.json": root_meta("4c02af2759b6", ["0"], base="4c/02af2759b6"),
        "4c/02af2759b6/0/metadata.json": fixture("v1branch_session_metadata_legacy_dated_session_id.json"),
        "4c/02af2759b6/0/full.jsonl": LEGACY_FULL,
        "4c/02af2759b6/0/content_hash.txt": b"sha256:3391896b7fd95a5786e09a7ef9964fa135e85d8b5a8f54fb3b76c3923136b23d",
        "4c/02af2759b6/0/prompt.txt": b"first prompt",
        "4c/02af2759b6/0/context.md": b"# Session Context\n",
        "4c/02af2759b6/0/notes.txt": b"an unknown file",
        "4c/02af2759b6/tasks/toolu_LEGACY/checkpoint.json": meta(session_id=S1, tool_use_id="toolu_LEGACY"),
        "4c/02af2759b6/tasks/toolu_LEGACY/checkpoints/001-toolu_LEGACY.json": meta(type="start"),
    }
    first = commit(work, v1, legacy, "Checkpoint: 4c02af2759b6", when=1_768_000_000)
    c0 = "c0/ffee000001"
    rest = {
        # several checkpoints of one session: S1 again, newer, chunked, with a subagent; a Gemini
        # session in folder 2 (folder 1 absent) without transcript.jsonl
        f"{c0}/metadata.json": root_meta("c0ffee000001", ["0", "2"], base=c0),
        f"{c0}/0/metadata.json": meta(session_id=S1, checkpoint_id="c0ffee000001", agent="Claude Code",
                                      created_at="2026-01-14T09:00:00Z", checkpoint_transcript_start=6),
        f"{c0}/0/full.jsonl": CHUNKS[0],
        f"{c0}/0/full.jsonl.001": CHUNKS[1],
        f"{c0}/0/full.jsonl.002": CHUNKS[2],
        f"{c0}/0/content_hash.txt": sha256(WHOLE).encode(),
        f"{c0}/0/prompt.txt": b"first prompt\n\n---\n\nsecond prompt",
        f"{c0}/2/metadata.json": meta(session_id=GEMINI, agent="Gemini CLI", created_at="2026-01-15T20:52:00Z"),
        f"{c0}/2/full.jsonl": fixture("v1branch_full_gemini_cli_single_json_object.jsonl"),
        f"{c0}/tasks/toolu_01ABC/agent-a1b2.jsonl": SUBAGENT,
        f"{c0}/tasks/toolu_01ABC/task.json": meta(tool_use_id="toolu_01ABC", agent_id="a1b2", session_id=S1),
        # Codex with transcript.jsonl (real ETF and metadata)
        "bb/ef1c2a76a9/metadata.json": fixture("v1branch_root_metadata_codex_etf.json"),
        "bb/ef1c2a76a9/0/metadata.json": fixture("v1branch_session0_metadata_codex_etf.json"),
        "bb/ef1c2a76a9/0/full.jsonl": CODEX_FULL,
        "bb/ef1c2a76a9/0/transcript.jsonl": fixture("v1branch_etf_codex.jsonl"),
        # Codex without transcript.jsonl; also under a per-checkpoint ref, which wins
        "b5/a37dc3d0fe/metadata.json": fixture("v1branch_root_metadata_two_sessions_cli0.5.6.json"),
        "b5/a37dc3d0fe/0/metadata.json": fixture("v1branch_session0_metadata_codex_cli0.5.6.json"),
        # Gemini with transcript.jsonl
        "9e/9e9e9e9e9e/metadata.json": root_meta("9e9e9e9e9e9e", ["0"], base="9e/9e9e9e9e9e", compact=("0",)),
        "9e/9e9e9e9e9e/0/metadata.json": meta(session_id=S4, agent="Gemini CLI", created_at="2026-01-16T10:00:00Z"),
        "9e/9e9e9e9e9e/0/full.jsonl": fixture("v1branch_full_gemini_cli_single_json_object.jsonl"),
        "9e/9e9e9e9e9e/0/transcript.jsonl": GEMINI_ETF,
        # hash mismatch
        "d0/0d00d00d00/metadata.json": root_meta("d00d00d00d00", ["0"], base="d0/0d00d00d00"),
        "d0/0d00d00d00/0/metadata.json": meta(session_id=S2, agent="Claude Code", created_at="2026-02-01T00:00:00Z"),
        "d0/0d00d00d00/0/full.jsonl": MISMATCH_FULL,
        "d0/0d00d00d00/0/content_hash.txt": sha256(b"something else").encode(),
        # a blob deleted below
        "e0/e0e0e0e0e0/metadata.json": root_meta("e0e0e0e0e0e0", ["0"], base="e0/e0e0e0e0e0"),
        "e0/e0e0e0e0e0/0/metadata.json": meta(session_id=S3, agent="Claude Code", created_at="2026-02-02T00:00:00Z"),
        "e0/e0e0e0e0e0/0/full.jsonl": MISSING_FULL,
        # corrupt session metadata
        "f0/f0f0f0f0f0/metadata.json": root_meta("f0f0f0f0f0f0", ["0"], base="f0/f0f0f0f0f0"),
        "f0/f0f0f0f0f0/0/metadata.json": b'{"session_id": "x",',
        "f0/f0f0f0f0f0/0/full.jsonl": b'{"type":"user"}\n',
        # not a checkpoint
        "_branches/main.json": b"{}",
    }
    # the checkpoint branch's own commits are not code history: this trailer must not be reported
    commit(work, v1, {**legacy, **rest}, "Checkpoint: c0ffee000001\n\nEntire-Checkpoint: d00d00d00d00\n",
           parents=(first,), when=1_768_100_000)
    git(work, "update-ref", "refs/remotes/origin/entire/checkpoints/v1", first)

    # per-checkpoint refs: a ULID written twice (read the tip), a migrated hex ID, a wrong shard, a v2 ref
    ulid_ref = f"refs/entire/checkpoints/{ULID[-2:]}/{ULID}"
    ulid_files = {
        "metadata.json": fixture("gitrefs_root_metadata_ulid.json"),
        "0/metadata.json": fixture("gitrefs_session0_metadata_codex.json"),
    }
    orphan = commit(work, ulid_ref, ulid_files, f"Checkpoint: {ULID}", when=1_768_200_000)
    commit(work, ulid_ref, {**ulid_files, "0/transcript.jsonl": fixture("v1branch_etf_codex.jsonl"),
                            "0/prompt.txt": b"fix the doctor"}, f"Finalize transcript for Checkpoint: {ULID}",
           parents=(orphan,), when=1_768_200_100)
    commit(work, "refs/entire/checkpoints/fe/b5a37dc3d0fe", {
        "metadata.json": fixture("v1branch_root_metadata_two_sessions_cli0.5.6.json"),
        "0/metadata.json": fixture("v1branch_session0_metadata_codex_cli0.5.6.json"),
        "0/full.jsonl": CODEX_FULL,
        "0/content_hash.txt": sha256(CODEX_FULL).encode(),
    }, "Checkpoint: b5a37dc3d0fe", when=1_768_300_000)
    commit(work, "refs/entire/checkpoints/zz/c0ffee000001", {"metadata.json": b"{}"}, "wrong shard")
    commit(work, "refs/entire/checkpoints/v2/main", {"metadata.json": b"{}"}, "v2 storage")

    # code history: one trailer, two trailers, a trailer naming an absent checkpoint
    c1 = commit(work, "refs/heads/main", {"README.md": b"one\n"},
                "Add readme\n\nEntire-Checkpoint: 4c02af2759b6\n", when=1_768_000_100)
    c2 = commit(work, "refs/heads/main", {"README.md": b"two\n"},
                f"Squash two changes\n\nEntire-Checkpoint: c0ffee000001\nEntire-Checkpoint: {ULID}\n",
                parents=(c1,), when=1_768_100_100)
    c3 = commit(work, "refs/heads/feature", {"README.md": b"three\n"},
                "Try something\n\nEntire-Checkpoint: 0123456789ab\n", parents=(c2,), when=1_768_100_200)
    git(work, "update-ref", "refs/remotes/origin/main", c1)
    git(work, "symbolic-ref", "HEAD", "refs/heads/main")

    bare = base / "bare.git"
    git(base, "clone", "-q", "--bare", str(work), str(bare))
    mirror = base / "mirror.git"
    git(base, "clone", "-q", "--mirror", str(work), str(mirror))
    missing = blob_id(MISSING_FULL)
    (work / ".git" / "objects" / missing[:2] / missing[2:]).unlink()
    return {"work": work, "bare": bare, "mirror": mirror, "commits": {"c1": c1, "c2": c2, "c3": c3}}


# ---------------------------------------------------------------------------------------------
# Entire's v2 refs (reference entire.md §9): a repository with v1 and v2 written side by side

V2_MAIN = "refs/entire/checkpoints/v2/main"
V2_CURRENT = "refs/entire/checkpoints/v2/full/current"
V2_SEALED = "refs/entire/checkpoints/v2/full/0000000000001"
V2_DUAL, V2_ONLY, V2_TWICE, V2_ORPHAN = "aa00000000a1", "bb00000000b2", "cc00000000c3", "dd00000000d4"
SA, SB, SC, SD, SE = (f"{n}{n}{n}{n}{n}{n}{n}{n}-0000-4000-8000-00000000000{n}" for n in "abcde")


def claude_lines(sid: str, texts: list[str]) -> bytes:
    """Claude Code user lines of session `sid`, one per text, each ending with a newline."""
    lines = []
    for i, text in enumerate(texts):
        lines.append(json.dumps({
            "type": "user", "sessionId": sid, "uuid": f"{sid[:8]}-0000-4000-8000-{i:012d}",
            "parentUuid": None if i == 0 else f"{sid[:8]}-0000-4000-8000-{i - 1:012d}",
            "timestamp": f"2026-05-0{1 + i % 9}T10:00:00.000Z", "message": {"role": "user", "content": text},
        }))
    return ("\n".join(lines) + "\n").encode()


def v2_root_meta(cid: str, folders: list[str]) -> bytes:
    """A v2 checkpoint summary: sessions[] names the compact transcript and its hash (§9.3)."""
    base = f"/{cid[:2]}/{cid[2:]}"
    sessions = [{"metadata": f"{base}/{f}/metadata.json", "transcript": f"{base}/{f}/transcript.jsonl",
                 "content_hash": f"{base}/{f}/transcript_hash.txt", "prompt": f"{base}/{f}/prompt.txt"}
                for f in folders]
    return meta(cli_version="0.6.1", checkpoint_id=cid, strategy="manual-commit", checkpoints_count=1,
                sessions=sessions)


# V2_DUAL's session metadata (§9.6 rule 5): SA in both layouts, SB in v2 only; v1's summary counts SA alone
V2_DUAL_SESSIONS = {
    SA: {"checkpoints_count": 2, "files_touched": ["src/shared.py", "src/a.py"],
         "token_usage": {"input_tokens": 120, "cache_creation_tokens": 40, "cache_read_tokens": 3000,
                         "output_tokens": 75, "api_call_count": 4}},
    SB: {"checkpoints_count": 3, "files_touched": ["src/b.py", "src/shared.py"], "kind": "agent_review",
         "token_usage": {"input_tokens": 9, "cache_creation_tokens": 0, "cache_read_tokens": 500,
                         "output_tokens": 31, "api_call_count": 2}},
}
V2_DUAL_ATTRIBUTION = {"agent_lines": 12, "human_added": 3, "total_committed": 15, "agent_percentage": 80,
                       "metric_version": 2}  # on v2's summary only

V2_RAW = {
    # a session in both layouts, its raw bytes differing (the hashes differ: a declared loss, v1 read)
    "dual_v1": claude_lines(SA, ["v1 one", "v1 two"]),
    "dual_v2": claude_lines(SA, ["v2 one", "v2 two", "v2 three", "v2 four"]),
    "only_in_v2": claude_lines(SB, ["b one", "b two", "b three"]),  # named full.jsonl, without a hash
    "chunked": claude_lines(SC, [f"c {i}" for i in range(7)]),  # in the sealed generation, in two chunks
    "current": claude_lines(SE, ["e new one", "e new two"]),  # hash mismatch; a sealed copy is older
    "sealed_copy": claude_lines(SE, ["e old"]),
    "orphan": claude_lines(SD, ["no metadata on /main"]),
}


def build_v2(base: Path) -> Path:
    """A working tree with a v1 branch, Entire's v2 refs and a code commit naming a v2-only checkpoint.

    - V2_DUAL: on v1 with session SA; on v2 with SA (other raw bytes) and SB (v2 only): layout v1+v2;
      session metadata V2_DUAL_SESSIONS, each summary aggregating the sessions its layout holds.
    - V2_ONLY: v2 only (Entire 0.6.1); SC's raw transcript in the sealed generation as two chunks,
      with a compact transcript and checkpoint_transcript_start 3 (a compact line, from 0.5.5); SD
      with no raw transcript anywhere, read from its compact transcript; a second folder with SC's ID.
    - V2_TWICE: v2 only; SE's raw in /full/current (a wrong hash) and an older copy in the generation.
    - V2_ORPHAN: raw files on /full/current, nothing on /main."""
    work = init(base / "work")
    sa, sb = V2_DUAL_SESSIONS[SA], V2_DUAL_SESSIONS[SB]
    # each summary as Entire's writer aggregates the sessions it holds: v1's SA alone, v2's SA and SB
    v1_root = {**json.loads(root_meta(V2_DUAL, ["0"], base="aa/00000000a1")), "checkpoints_count": 2,
               "files_touched": ["src/a.py", "src/shared.py"], "token_usage": sa["token_usage"]}
    v2_root = {**json.loads(v2_root_meta(V2_DUAL, ["0", "1"])), "checkpoints_count": 5,
               "files_touched": ["src/a.py", "src/b.py", "src/shared.py"], "has_review": True,
               "token_usage": {"input_tokens": 129, "cache_creation_tokens": 40, "cache_read_tokens": 3500,
                               "output_tokens": 106, "api_call_count": 6},
               "combined_attribution": V2_DUAL_ATTRIBUTION}
    commit(work, "refs/heads/entire/checkpoints/v1", {
        "aa/00000000a1/metadata.json": meta(**v1_root),
        "aa/00000000a1/0/metadata.json": meta(session_id=SA, checkpoint_id=V2_DUAL, agent="Claude Code",
                                              cli_version="0.6.1", created_at="2026-05-01T10:00:00Z", **sa),
        "aa/00000000a1/0/full.jsonl": V2_RAW["dual_v1"],
        "aa/00000000a1/0/content_hash.txt": sha256(V2_RAW["dual_v1"]).encode(),
    }, f"Checkpoint: {V2_DUAL}", when=1_777_000_000)
    etf = fixture("v1branch_etf_codex.jsonl")
    chunked = V2_RAW["chunked"]
    cut = chunked.index(b"\n", len(chunked) // 2)
    commit(work, V2_MAIN, {
        "aa/00000000a1/metadata.json": meta(**v2_root),
        "aa/00000000a1/0/metadata.json": meta(session_id=SA, checkpoint_id=V2_DUAL, agent="Claude Code",
                                              cli_version="0.6.1", created_at="2026-05-01T10:00:00Z", **sa),
        "aa/00000000a1/1/metadata.json": meta(session_id=SB, checkpoint_id=V2_DUAL, agent="Claude Code",
                                              cli_version="0.6.1", created_at="2026-05-01T11:00:00Z", **sb),
        "aa/00000000a1/1/prompt.txt": b"the v2-only session",
        "bb/00000000b2/metadata.json": v2_root_meta(V2_ONLY, ["0", "1", "2"]),
        "bb/00000000b2/0/metadata.json": meta(session_id=SC, checkpoint_id=V2_ONLY, agent="Claude Code",
                                              cli_version="0.6.1", created_at="2026-05-02T10:00:00Z",
                                              checkpoint_transcript_start=3),
        "bb/00000000b2/0/transcript.jsonl": etf,
        "bb/00000000b2/0/transcript_hash.txt": sha256(etf).encode(),
        "bb/00000000b2/1/metadata.json": meta(session_id=SD, checkpoint_id=V2_ONLY, agent="Codex",
                                              cli_version="0.6.1", created_at="2026-05-02T11:00:00Z"),
        "bb/00000000b2/1/transcript.jsonl": etf,
        "bb/00000000b2/1/transcript_hash.txt": sha256(etf).encode(),
        "bb/00000000b2/2/metadata.json": meta(session_id=SC, checkpoint_id=V2_ONLY, agent="Claude Code",
                                              cli_version="0.6.1", created_at="2026-05-02T12:00:00Z"),
        "cc/00000000c3/metadata.json": v2_root_meta(V2_TWICE, ["0"]),
        "cc/00000000c3/0/metadata.json": meta(session_id=SE, checkpoint_id=V2_TWICE, agent="Claude Code",
                                              cli_version="0.6.1", created_at="2026-05-03T10:00:00Z"),
    }, f"Checkpoint: {V2_TWICE}", when=1_777_100_000)
    commit(work, V2_CURRENT, {
        "aa/00000000a1/0/raw_transcript": V2_RAW["dual_v2"],
        "aa/00000000a1/0/raw_transcript_hash.txt": sha256(V2_RAW["dual_v2"]).encode(),
        "aa/00000000a1/1/full.jsonl": V2_RAW["only_in_v2"],  # the name in /full before Entire 0.5.6
        "cc/00000000c3/0/raw_transcript": V2_RAW["current"],
        "cc/00000000c3/0/raw_transcript_hash.txt": sha256(b"other bytes").encode(),
        "dd/00000000d4/0/raw_transcript": V2_RAW["orphan"],
    }, f"Checkpoint: {V2_TWICE}", when=1_777_100_000)
    commit(work, V2_SEALED, {
        "generation.json": meta(oldest_checkpoint_at="2026-05-02T10:00:00Z", newest_checkpoint_at="2026-05-02T10:00:00Z"),
        # Entire writes each chunk without the final newline and joins them with one
        "bb/00000000b2/0/raw_transcript": chunked[:cut],
        "bb/00000000b2/0/raw_transcript.001": chunked[cut + 1:],
        "bb/00000000b2/0/raw_transcript_hash.txt": sha256(chunked).encode(),
        "cc/00000000c3/0/raw_transcript": V2_RAW["sealed_copy"],
        "cc/00000000c3/0/raw_transcript_hash.txt": sha256(V2_RAW["sealed_copy"]).encode(),
    }, "Archive generation", when=1_777_050_000)
    commit(work, "refs/heads/main", {"README.md": b"v2\n"}, f"Work\n\nEntire-Checkpoint: {V2_ONLY}\n",
           when=1_777_200_000)
    git(work, "symbolic-ref", "HEAD", "refs/heads/main")
    return work
