"""Loading one session: the blobs of a session folder and its subagent records, read into a unit of work.

The transcript's chunks are joined as Entire reassembles them and checked against content_hash.txt;
`native_format_of` names the converter for a full.jsonl. `iter_units` scans, selects and loads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pygit2

from batch.sources.entire.checkpoint import absent_blob, first_bytes, json_or_none
from batch.sources.entire.model import (
    Blob,
    FileEntry,
    Provenance,
    SessionEntry,
    SessionUnit,
    SourceLoss,
    TaskUnit,
)
from batch.sources.entire.scan import scan_checkpoints
from batch.sources.entire.selection import select_sessions
from batch.sources import codex
from batch.sources.base import CLAUDE_CODE
from batch.sources.git import read_blob

# The agents whose native transcript (full.jsonl) a converter of this project reads, by Entire's name.
NATIVE_AGENTS = {"Claude Code": CLAUDE_CODE, "Codex": codex.FORMAT}


def load_session(repo: pygit2.Repository, session: SessionEntry) -> SessionUnit:
    """Read the blobs of one session folder (and its subagent records) into a unit of work."""
    cid, folder = session.checkpoint_id, session.folder
    losses = list(session.losses)

    def provenance(file: FileEntry) -> Provenance:
        loc = file.location or session.location
        return Provenance(loc.repository, loc.ref, loc.commit_id, cid, file.path, file.blob_id)

    def read(file: FileEntry | None) -> Blob | None:
        if file is None:
            return None
        data = read_blob(repo, pygit2.Oid(hex=file.blob_id))
        if data is None:
            if not any(loss.path == file.path and loss.category == "missing_blob" for loss in losses):
                losses.append(SourceLoss("missing_blob", absent_blob(file.blob_id), cid, folder, file.path))
            return None
        return Blob(data, (provenance(file),))

    # a transcript with an absent chunk is not read at all (each absent blob is a declared loss)
    transcript = _join_chunks([read(session.files.get("transcript")), *(read(c) for c in session.chunks)])
    content_hash = _stored_hash(read(session.files.get("content_hash")))
    hash_ok = _verify(session, "content_hash", content_hash, transcript, losses)
    tasks = []
    for task in session.tasks:
        task_json_blob = read(task.task_json)
        task_data = json_or_none(task_json_blob.data) if task_json_blob else None
        if task_json_blob is not None and not isinstance(task_data, dict):
            losses.append(SourceLoss("corrupt_metadata", "task.json is not a JSON object: "
                                     + first_bytes(task_json_blob.data), cid, folder, task.task_json.path))
            task_data = None
        transcripts = [b for b in (read(f) for f in task.transcripts) if b is not None]
        others = [b for b in (read(f) for f in task.other) if b is not None]
        if not task.transcripts and task_data is not None and task_data.get("transcript_unavailable_reason"):
            losses.append(SourceLoss("missing_subagent_transcript",
                                     f"task.json says: {task_data['transcript_unavailable_reason']}",
                                     cid, folder, task.path))
        tasks.append(TaskUnit(
            task.tool_use_id, transcripts, task_data,
            provenance(task.task_json) if task.task_json else None, others,
        ))
    compact = read(session.files.get("compact_transcript"))
    _verify(session, "compact_hash", _stored_hash(read(session.files.get("compact_hash"))), compact, losses)
    native_format = native_format_of(session, transcript)
    if native_format is None and compact is None:
        if transcript is not None:
            losses.append(SourceLoss("unsupported_agent", f"agent {session.agent or 'unknown'}: no native converter "
                                     "for its full.jsonl, and no transcript.jsonl", cid, folder, session.path))
        elif "transcript" not in session.files and not any(x.path == session.path for x in losses):
            losses.append(SourceLoss("no_transcript", "the session folder holds neither full.jsonl nor "
                                     "transcript.jsonl", cid, folder, session.path))
        # else: full.jsonl is named but unreadable, a missing_blob loss already says so
    return SessionUnit(
        entry=session,
        transcript=transcript,
        compact_transcript=compact,
        prompt=read(session.files.get("prompt")),
        context=read(session.files.get("context")),
        tasks=tasks,
        unknown=[b for b in (read(f) for f in session.unknown) if b is not None],
        content_hash=content_hash,
        content_hash_ok=hash_ok,
        native_format=native_format,
        losses=losses,
    )


def _stored_hash(blob: Blob | None) -> str | None:
    return None if blob is None else blob.data.decode("utf-8", "replace").strip()


def _verify(
    session: SessionEntry, role: str, stored: str | None, blob: Blob | None, losses: list[SourceLoss]
) -> bool | None:
    """Whether `blob` hashes to the `stored` hash of its file `role` (content_hash: the raw transcript;
    compact_hash: v2's transcript.jsonl); a mismatch is a declared loss. None when either is absent."""
    if stored is None or blob is None:
        return None
    chunked = role == "content_hash" and bool(session.chunks)
    if _hash_matches(stored, blob.data, chunked=chunked):
        return True
    path = session.files[role].path
    if session.layout == "v2":
        category = "v2_raw_hash_mismatch" if role == "content_hash" else "v2_compact_hash_mismatch"
    else:
        category = "hash_mismatch"
    what = "transcript" if role == "content_hash" else "compact transcript"
    losses.append(SourceLoss(
        category,
        f"{path.rsplit('/', 1)[-1]} says {stored[:80]}, the {what} hashes to "
        f"sha256:{hashlib.sha256(blob.data).hexdigest()}: it changed after Entire stored it; "
        "converted as stored, its integrity unverified",
        session.checkpoint_id, session.folder, path,
    ))
    return False


def _join_chunks(parts: list[Blob | None]) -> Blob | None:
    """full.jsonl then full.jsonl.001, ...: Entire writes each chunk without its final newline and joins
    them with one newline. A missing piece makes the whole unreadable (None)."""
    if not parts or any(p is None for p in parts):
        return None
    if len(parts) == 1:
        return parts[0]
    return Blob(b"\n".join(p.data for p in parts), tuple(pv for p in parts for pv in p.provenance))


def _hash_matches(stored: str, data: bytes, *, chunked: bool) -> bool:
    expected = stored.removeprefix("sha256:").strip().lower()
    if hashlib.sha256(data).hexdigest() == expected:
        return True
    # The hash covers the transcript before chunking; when it ended with a newline, the last chunk lost it.
    return chunked and hashlib.sha256(data + b"\n").hexdigest() == expected


def native_format_of(session: SessionEntry, transcript: Blob | None) -> str | None:
    """The converter format for a session's full.jsonl, or None when this project has none for it.

    Claude Code sessions (agent "Claude Code"; legacy metadata without an agent whose full.jsonl
    starts with a JSON object carrying a `type`) go to the Claude Code converter; Codex sessions whose
    full.jsonl is a rollout (its first line a session_meta with the session's id: Entire's copy,
    keys reordered) to the Codex converter, else their transcript.jsonl is read."""
    if transcript is None:
        return None
    agent = session.agent
    if agent == "Codex":  # the first line whole: it holds the base instructions, tens of KB
        end = transcript.data.find(b"\n")
        return NATIVE_AGENTS[agent] if codex.meta_of(transcript.data[: end if end >= 0 else None]) else None
    first = next((line for line in transcript.data[:1 << 16].split(b"\n") if line.strip()), b"")
    if agent is not None:
        return NATIVE_AGENTS.get(agent)
    obj = json_or_none(first)
    return CLAUDE_CODE if isinstance(obj, dict) and isinstance(obj.get("type"), str) else None


def iter_units(repo: pygit2.Repository, *, combine: bool = False) -> Iterator[SessionUnit]:
    """Scan, select and load: one unit of work per selected session, read when it is reached."""
    for session in select_sessions(scan_checkpoints(repo), combine=combine):
        yield load_session(repo, session)
