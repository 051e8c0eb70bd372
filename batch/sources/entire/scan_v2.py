"""Entire's checkpoints v2 (reference entire.md §9): `refs/entire/checkpoints/v2/main` and the raw
transcripts of `v2/full/current` and the sealed generations `v2/full/<13 digits>`, merged into the
checkpoints the other layouts found.

`/main` holds each checkpoint as the v1 branch does (`<id[:2]>/<id[2:]>/`, a summary, session folders
with metadata.json, prompt.txt and the compact transcript.jsonl with its transcript_hash.txt, read by
checkpoint.py); the raw transcripts are on the `/full` refs, per session folder
`<id[:2]>/<id[2:]>/<N>/` (`raw_transcript`, chunks `raw_transcript.001`..., `raw_transcript_hash.txt`,
`tasks/`; older CLIs named them `full.jsonl[.NNN]`, `content_hash.txt`). A session folder's raw
files come from the first `/full` ref holding them: current, then the generations from the newest
(a later copy is listed in `Scan.skipped`).

The union (§9.6 rule 4): by checkpoint ID, then by session ID, never by slot. A checkpoint no other
layout holds is read from v2 (`layout` v2). In a checkpoint v1 holds, a session v1 holds is taken
from v1 (v1 is never staler; a raw-hash difference outside Codex is the loss `v1_v2_divergent`) and
a session only v2 holds is added (`layout` v1+v2). The root summary of such a checkpoint counts v1's
sessions only, so its aggregates are recomputed from the union (§9.6 rule 5, `reaggregate`).
Declared losses, never errors: `v2_missing_raw_transcript` (the session row stays, with its
metadata, prompt and compact transcript), `v2_raw_hash_missing`, `v2_duplicate_session_id` (the later
slot is not read), `v2_raw_without_main` (raw files of a folder `/main` does not hold),
`v1_v2_divergent`, `v1_v2_root_recomputed` (a recomputed aggregate differs from v1's stored one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

import pygit2

from batch.sources.entire.checkpoint import absent_blob, read_tasks, tree_or_none
from batch.sources.entire.model import (
    Checkpoint,
    CheckpointLocation,
    FileEntry,
    Scan,
    SessionEntry,
    SourceLoss,
    TaskEntry,
    is_checkpoint_id,
)
from batch.sources.entire.scan_v1 import read_branch
from batch.sources.git import blob_size, peel_commit, read_blob

MAIN = "refs/entire/checkpoints/v2/main"
CURRENT = "refs/entire/checkpoints/v2/full/current"
GENERATION = re.compile(r"^refs/entire/checkpoints/v2/full/(\d{13})$")
RAW_FILES = {
    "raw_transcript": "transcript", "raw_transcript_hash.txt": "content_hash",
    "full.jsonl": "transcript", "content_hash.txt": "content_hash",  # names in /full before Entire 0.5.6
}
RAW_CHUNK = re.compile(r"^(?:raw_transcript|full\.jsonl)\.(\d+)$")
# The agent whose v2 raw transcript differs from v1's by design: v1 sanitizes it, v2 does not (§9.3)
SANITIZED_IN_V1 = "Codex"
# The token_usage counts Entire's writer sums over the sessions into the root summary (reaggregateFromEntries)
SUMMED_TOKENS = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens", "api_call_count")


def claims(ref: str) -> bool:
    """`/main`, `/full/current` or a sealed generation; other refs under v2/ are not read."""
    return ref in (MAIN, CURRENT) or bool(GENERATION.match(ref))


@dataclass
class RawFolder:
    """The raw files of one v2 session folder, from the first /full ref holding them."""

    location: CheckpointLocation
    path: str
    files: dict[str, FileEntry] = field(default_factory=dict)  # transcript, content_hash
    chunks: list[FileEntry] = field(default_factory=list)
    tasks: list[TaskEntry] = field(default_factory=list)
    losses: list[SourceLoss] = field(default_factory=list)


def merge(repo: pygit2.Repository, scan: Scan, refs: list[str]) -> None:
    """Read the v2 refs among `refs` and merge their checkpoints and sessions into `scan`."""
    if not refs:
        return
    raw = _raw_index(repo, scan, refs)
    chosen = {c.checkpoint_id: c for c in scan.checkpoints}
    used: set[tuple[str, str]] = set()
    for v2 in read_branch(repo, scan.repository, MAIN, scan) if MAIN in refs else ():
        sessions = _unique_sessions(v2)
        for session in sessions:
            session.layout = "v2"
            folder = raw.get((v2.checkpoint_id, session.folder))
            if folder is None:
                session.losses.append(SourceLoss(
                    "v2_missing_raw_transcript", "no /full ref holds this session's raw transcript (an archived "
                    "generation cleaned up or not fetched, or an empty transcript): its metadata, prompt and "
                    "compact transcript are kept", v2.checkpoint_id, session.folder, session.path))
            else:
                used.add((v2.checkpoint_id, session.folder))
                _attach(session, folder)
        v1 = chosen.get(v2.checkpoint_id)
        if v1 is None:
            v2.sessions, v2.layout = sessions, "v2"
            scan.checkpoints.append(v2)
        else:
            _union(repo, v1, v2, sessions)
    read = {c.checkpoint_id: c for c in scan.checkpoints}
    for (cid, folder), entry in sorted(raw.items()):
        if (cid, folder) not in used:
            loss = SourceLoss("v2_raw_without_main", f"raw transcript files under {entry.location.ref} with no "
                              f"session metadata on {MAIN}: no session to give them to", cid, folder, entry.path)
            (read[cid].losses if cid in read else scan.unattached).append(loss)
    scan.checkpoints.sort(key=lambda c: c.checkpoint_id)


def _raw_index(repo: pygit2.Repository, scan: Scan, refs: list[str]) -> dict[tuple[str, str], RawFolder]:
    """(checkpoint ID, session folder) -> its raw files, from the first /full ref holding them:
    current, then the generations from the newest."""
    generations = sorted((r for r in refs if GENERATION.match(r)), reverse=True)
    index: dict[tuple[str, str], RawFolder] = {}
    for ref in ([CURRENT] if CURRENT in refs else []) + generations:
        commit = peel_commit(repo, ref)
        if commit is None:
            scan.skipped.append((ref, "does not point to a commit"))
            continue
        for cid, folder, path, tree in _session_folders(repo, commit.tree):
            location = CheckpointLocation(scan.repository, ref, str(commit.id), f"{cid[:2]}/{cid[2:]}")
            found = _raw_folder(repo, location, cid, folder, path, tree)
            if "transcript" not in found.files and not found.chunks:
                continue  # a folder of task metadata alone
            if (cid, folder) in index:
                scan.skipped.append((f"{ref}:{path}", f"a later copy of raw transcript files read from "
                                                      f"{index[cid, folder].location.ref}"))
                continue
            index[cid, folder] = found
    return index


def _session_folders(repo: pygit2.Repository, root: pygit2.Tree):
    """(checkpoint ID, folder, tree path, tree) of every `<id[:2]>/<id[2:]>/<N>/` of a /full tree."""
    for top in sorted(root, key=lambda e: e.name):
        shard = tree_or_none(repo, top) if top.type_str == "tree" and len(top.name) == 2 else None
        for sub in sorted(shard or (), key=lambda e: e.name):
            cid = top.name + sub.name
            checkpoint = tree_or_none(repo, sub) if sub.type_str == "tree" and is_checkpoint_id(cid) else None
            for slot in sorted(checkpoint or (), key=lambda e: e.name):
                tree = tree_or_none(repo, slot) if slot.type_str == "tree" and slot.name.isdigit() else None
                if tree is not None:
                    yield cid, slot.name, f"{top.name}/{sub.name}/{slot.name}", tree


def _raw_folder(
    repo: pygit2.Repository, location: CheckpointLocation, cid: str, folder: str, path: str, tree: pygit2.Tree
) -> RawFolder:
    found = RawFolder(location, path)
    chunks = []
    for child in sorted(tree, key=lambda e: e.name):
        child_path = f"{path}/{child.name}"
        if child.type_str == "tree" and child.name == "tasks":
            tasks = read_tasks(repo, child, child_path, cid, found.losses)
            found.tasks = [_located_task(task, location) for task in tasks]
            continue
        entry = FileEntry(child_path, str(child.id), blob_size(repo, child.id), location)
        if child.name in RAW_FILES and RAW_FILES[child.name] not in found.files:
            found.files[RAW_FILES[child.name]] = entry
        elif chunk := RAW_CHUNK.match(child.name):
            chunks.append((int(chunk.group(1)), entry))
    found.chunks = [entry for _, entry in sorted(chunks, key=lambda c: c[0])]
    return found


def _located_task(task: TaskEntry, location: CheckpointLocation) -> TaskEntry:
    def at(entry: FileEntry | None) -> FileEntry | None:
        return None if entry is None else replace(entry, location=location)

    return TaskEntry(task.tool_use_id, task.path, [at(f) for f in task.transcripts], at(task.task_json),
                     [at(f) for f in task.other])


def _attach(session: SessionEntry, raw: RawFolder) -> None:
    """Give a v2 session its raw transcript, its hash and its subagent records."""
    session.files.update(raw.files)
    session.chunks = raw.chunks
    session.tasks.extend(raw.tasks)
    session.losses.extend(raw.losses)
    for entry in (*raw.files.values(), *raw.chunks):
        if entry.size is None:
            session.losses.append(SourceLoss("missing_blob", absent_blob(entry.blob_id), session.checkpoint_id,
                                             session.folder, entry.path))
    if "content_hash" not in raw.files:
        session.losses.append(SourceLoss(
            "v2_raw_hash_missing", f"the raw transcript under {raw.location.ref} has no raw_transcript_hash.txt: "
            "converted as stored, its integrity unverified", session.checkpoint_id, session.folder, raw.path))


def _unique_sessions(checkpoint: Checkpoint) -> list[SessionEntry]:
    """The v2 checkpoint's sessions, one per session ID: a later slot with the same ID is not read."""
    seen: dict[str, SessionEntry] = {}
    kept = []
    for session in checkpoint.sessions:
        sid = session.session_id
        if sid is not None and sid in seen:
            checkpoint.losses.append(SourceLoss(
                "v2_duplicate_session_id", f"session {sid} is also in folder {seen[sid].folder}/ of this v2 "
                "checkpoint (corrupt v2 data): this folder is not read", checkpoint.checkpoint_id, session.folder,
                session.path))
            continue
        if sid is not None:
            seen[sid] = session
        kept.append(session)
    return kept


def _union(repo: pygit2.Repository, v1: Checkpoint, v2: Checkpoint, sessions: list[SessionEntry]) -> None:
    """Sessions of a checkpoint both layouts hold: v1's, then those only v2 has."""
    by_id = {s.session_id: s for s in v1.sessions if s.session_id}
    added = []
    for session in sessions:
        both = by_id.get(session.session_id)
        if session.session_id is None:  # its metadata is missing or corrupt: a loss says so
            v1.losses.extend(session.losses)
        elif both is None:
            added.append(session)
        elif both is not None and both.agent != SANITIZED_IN_V1:
            _compare_hashes(repo, both, session)
    v1.losses.extend(v2.losses)
    if added:
        v1.sessions.extend(added)
        v1.layout = "v1+v2"
        # as the migration tool: a session v1 holds is skipped before its raw transcript is looked for
        unreadable = any(s.session_id is None for s in sessions) or any(
            x.category == "v2_missing_raw_transcript" for s in added for x in s.losses) or any(
            x.category == "missing_session_folder" for x in v2.losses)
        reaggregate(v1, v2.metadata, unreadable=unreadable)
    else:
        v1.shadowed.append(MAIN)


def reaggregate(v1: Checkpoint, v2_root: dict | None, *, unreadable: bool) -> None:
    """Set `v1.recomputed`: the root aggregates of the union of its sessions (`v1.sessions`), as Entire's
    writer sums them (§9.6 rule 5); v1's stored summary stays in `v1.metadata`. `v2_root`: v2's summary.

    checkpoints_count is the sum of the sessions', files_touched their sorted union, token_usage the
    sum of SUMMED_TOKENS (null when no session has one), has_review whether a session is an
    agent_review. combined_attribution is v1's, else v2's unless a v2 session was `unreadable` (no
    metadata, or added without a raw transcript), as the migration tool keeps it. A folder without
    readable metadata adds nothing. A value differing from v1's stored one is the loss
    `v1_v2_root_recomputed`."""
    metas = [s.metadata for s in v1.sessions if isinstance(s.metadata, dict)]
    files = sorted({f for m in metas if isinstance(m.get("files_touched"), list)
                    for f in m["files_touched"] if isinstance(f, str)})
    usages = [m["token_usage"] for m in metas if isinstance(m.get("token_usage"), dict)]
    stored = v1.metadata if isinstance(v1.metadata, dict) else {}
    attribution = stored.get("combined_attribution")
    if attribution is None and not unreadable and isinstance(v2_root, dict):
        attribution = v2_root.get("combined_attribution")
    v1.recomputed = {
        "checkpoints_count": sum(_count(m.get("checkpoints_count")) for m in metas),
        "files_touched": files or None,
        "token_usage": {k: sum(_count(u.get(k)) for u in usages) for k in SUMMED_TOKENS} if usages else None,
        "has_review": any(m.get("kind") == "agent_review" for m in metas),
        "combined_attribution": attribution,
    }
    differ = [f"{key} {_shown(stored.get(key))} -> {_shown(value)}" for key, value in v1.recomputed.items()
              if _normal(key, stored.get(key)) != _normal(key, value)]
    if differ:
        v1.losses.append(SourceLoss(
            "v1_v2_root_recomputed", f"v1's root summary does not count the sessions v2 adds: recomputed from "
            f"the {len(metas)} session metadata files of both layouts, {'; '.join(differ)} (v1's stored "
            "values stay in the row's metadata)",
            v1.checkpoint_id, None, v1.location.path("metadata.json")))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _normal(key: str, value: object) -> object:
    """A root value as compared: Entire omits an empty files_touched and a false has_review."""
    if key == "files_touched":
        return value or None
    if key == "has_review":
        return bool(value)
    return value


def _shown(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."


def _compare_hashes(repo: pygit2.Repository, v1: SessionEntry, v2: SessionEntry) -> None:
    stored = [_text(repo, s.files.get("content_hash")) for s in (v1, v2)]
    if None not in stored and _digest(stored[0]) != _digest(stored[1]):
        v1.losses.append(SourceLoss(
            "v1_v2_divergent", f"the v1 transcript hashes to {stored[0][:80]}, the v2 raw transcript of the same "
            f"session to {stored[1][:80]}: v1's is converted", v1.checkpoint_id, v1.folder,
            v1.files["content_hash"].path))


def _text(repo: pygit2.Repository, entry: FileEntry | None) -> str | None:
    data = None if entry is None else read_blob(repo, pygit2.Oid(hex=entry.blob_id))
    return None if data is None else data.decode("utf-8", "replace").strip()


def _digest(stored: str) -> str:
    return stored.removeprefix("sha256:").strip().lower()
