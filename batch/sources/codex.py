"""OpenAI Codex CLI rollout files (`$CODEX_HOME/sessions/**/rollout-*.jsonl`): told apart by content.

Rollouts Codex compressed (`rollout-*.jsonl.zst`) are read decompressed and named as their plain
form (sources/claude_code.py, `_add_compressed`): a rollout compressed, or decompressed to be
resumed, between two runs is the same file, reused when its size and modification time (which
Codex keeps) are unchanged.

A file is a rollout when its first line is a `session_meta` envelope (Codex 0.32 and later:
`{"timestamp", "type": "session_meta", "payload": {"id", ...}}`) or the legacy first line of the
Rust CLI before 0.32 (`{"id", "timestamp", "instructions"[, "git"]}`, no `type`), reference §2.
The path says nothing: folder and file name are in local time and are never read for identity.
One unit per file: the session is the first `session_meta`'s `id` (reference §3, §10); the rollouts
of one thread (`thread/revert` writes a second file of the thread, `rollout_id`) are units of the same
owner, so one batch converts them together. A fork or a subagent needs no unit of its parent: what it copies from the parent (token_count events above all)
is told apart across batches by the inference ID the format derives from the usage itself
(formats/codex), so each file is a unit of its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

from batch.sources.base import Stream, open_file

FORMAT = "codex-rollout-jsonl"
BOM = b"\xef\xbb\xbf"
HEAD_LIMIT = 8 << 20  # a first line holds base_instructions (10 to 60 KB); never read more than this
READ = 1 << 16


def default_sources() -> list[Path]:
    """`$CODEX_HOME/sessions` and `$CODEX_HOME/archived_sessions` (CODEX_HOME: else ~/.codex)."""
    base = os.environ.get("CODEX_HOME")
    home = Path(base) if base else Path.home() / ".codex"
    return [home / "sessions", home / "archived_sessions"]


def first_line(path: Path, codec: str | None = None) -> bytes:
    """The file's first line (without its newline), read up to HEAD_LIMIT bytes; decompressed when
    `codec` names its compression."""
    out = bytearray()
    with open_file(path, codec) as fh:
        while len(out) < HEAD_LIMIT:
            block = fh.read(READ)
            if not block:
                break
            cut = block.find(b"\n")
            if cut >= 0:
                out += block[:cut]
                break
            out += block
    return bytes(out).removeprefix(BOM)


def rollout_meta(path: Path, codec: str | None = None) -> dict | None:
    """The session meta of a rollout file (its first line's payload), or None for any other file."""
    try:
        return meta_of(first_line(path, codec))
    except OSError:
        return None


def meta_of(first: bytes) -> dict | None:
    """The session meta a rollout's first line holds, or None when the line is no rollout's first."""
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
        meta = obj["payload"]
    elif "type" not in obj and "instructions" in obj and {"id", "timestamp"} <= obj.keys():
        meta = obj  # legacy Rust CLI (before 0.32)
    else:
        return None
    return meta if _text(meta.get("id")) else None


def parent_thread(meta: dict) -> str | None:
    """The thread a subagent was spawned by (source.subagent.thread_spawn, or the newer parent_thread_id)."""
    source = meta.get("source")
    spawn = source.get("subagent") if isinstance(source, dict) else None
    spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    parent = parent or meta.get("parent_thread_id")
    return parent if _text(parent) else None


def _text(value: object) -> bool:
    """Whether `value` is a string an ID can be: not empty, and text (no lone surrogate, which JSON's
    escapes allow and no column holds)."""
    if not isinstance(value, str) or not value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def is_subagent(meta: dict) -> bool:
    source = meta.get("source")
    return (isinstance(source, dict) and "subagent" in source) or meta.get("thread_source") == "subagent"


def refine(f: Stream, head_session_id: str | None) -> Stream:
    """The stream a file discovery found is read as: a rollout's when its first line is a session
    meta (`FileTable.refine`). A file whose head holds a Claude Code sessionId (`head_session_id`,
    what Claude Code's discovery read of it, kept across runs) is no rollout, and its first line is
    not read again."""
    meta = rollout_meta(f.path, f.codec) if f.path is not None and head_session_id is None else None
    return f if meta is None else rollout_stream(f, meta)


def rollout_stream(f: Stream, meta: dict) -> Stream:
    """The Codex stream of a file that discovery found (`f`), whose first line holds `meta`."""
    kind = "subagent" if is_subagent(meta) else "main"
    return Stream(
        f.name, f.size, kind, meta["id"], meta["id"], parent_thread(meta), producer_source=FORMAT, path=f.path,
        mtime_ns=f.mtime_ns, codec=f.codec,
    )


def rollout_id(name: str, thread: str) -> str:
    """Which rollout of its thread a file is (reference §14.5): `thread/revert` writes the thread's next
    rollout as `rollout-<ts>-<thread>_<rollout id>.jsonl`; any other file (the thread's first rollout,
    or a copy whose name does not say, such as an Entire checkpoint's full.jsonl) is the rollout whose
    id is the thread's own."""
    stem = PurePosixPath(name).name.removesuffix(".zst").removesuffix(".jsonl")
    head, sep, rollout = stem.rpartition("_")
    return rollout if sep and rollout and head.endswith(f"-{thread}") else thread


