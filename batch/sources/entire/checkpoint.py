"""One checkpoint tree read, whichever layout holds it: its summary, its session folders, its subagent records.

The tree is the checkpoint's subtree `<id[:2]>/<id[2:]>/` on the v1 branch (scan_v1.py) or the tip
tree of a per-checkpoint ref (scan_refs.py); `CheckpointLocation.base` tells which. Only the
`metadata.json` blobs are read (and, to give a task folder to its session, `task.json` or a legacy
`checkpoint.json`, else the session transcripts); every other blob is listed with its ID and size.
Anything unreadable is a `SourceLoss` naming the checkpoint, the session folder and the tree path.
"""

from __future__ import annotations

import json
import re

import pygit2

from batch.sources.entire.model import (
    Checkpoint,
    CheckpointLocation,
    FileEntry,
    SessionEntry,
    SourceLoss,
    TaskEntry,
)
from batch.sources.git import OBJECT_ERRORS, blob_size, read_blob

CHUNK = re.compile(r"^full\.jsonl\.(\d+)$")
KNOWN_SESSION_FILES = {
    "metadata.json": "metadata",
    "full.jsonl": "transcript",
    "transcript.jsonl": "compact_transcript",
    "prompt.txt": "prompt",
    "content_hash.txt": "content_hash",
    "context.md": "context",
    "transcript_hash.txt": "compact_hash",  # v2 (scan_v2.py): the hash of transcript.jsonl
}


def tree_or_none(repo: pygit2.Repository, entry: pygit2.Object) -> pygit2.Tree | None:
    try:
        return repo[entry.id]
    except OBJECT_ERRORS:
        return None


def read_checkpoint(repo: pygit2.Repository, cid: str, location: CheckpointLocation, tree: pygit2.Tree) -> Checkpoint:
    losses: list[SourceLoss] = []
    metadata = None
    entries = {e.name: e for e in tree}
    if "metadata.json" in entries:
        metadata = _read_json(repo, entries["metadata.json"], location.path("metadata.json"), cid, None, losses)
    else:
        losses.append(SourceLoss("missing_metadata", "the checkpoint has no metadata.json", cid, None,
                                 location.path("metadata.json")))
    if metadata is not None and metadata.get("checkpoint_id") not in (None, cid):
        losses.append(SourceLoss(
            "checkpoint_id_mismatch",
            f"metadata.json names checkpoint {metadata.get('checkpoint_id')!r}, stored under {cid}",
            cid, None, location.path("metadata.json"),
        ))
    # Session folders: those the summary lists, then any other numeric folder (never assume contiguity).
    folders: list[str] = []
    listed = (metadata or {}).get("sessions")
    for item in listed if isinstance(listed, list) else []:
        path = item.get("metadata") if isinstance(item, dict) else None
        folder = _listed_folder(path, cid, location) if isinstance(path, str) else None
        if folder is not None and folder not in folders:
            folders.append(folder)
    for name_, entry in sorted(entries.items(), key=lambda kv: (len(kv[0]), kv[0])):
        if entry.type_str == "tree" and name_.isdigit() and name_ not in folders:
            folders.append(name_)
    sessions = []
    for folder in folders:
        if folder not in entries or entries[folder].type_str != "tree":
            losses.append(SourceLoss("missing_session_folder", f"metadata.json lists session folder {folder}/, "
                                     "which the checkpoint tree does not hold", cid, folder, location.path(folder)))
            continue
        sessions.append(_read_session(repo, cid, location, folder, entries[folder]))
    if "tasks" in entries and entries["tasks"].type_str == "tree":
        tasks = read_tasks(repo, entries["tasks"], location.path("tasks"), cid, losses)
        _assign_tasks(repo, tasks, sessions, cid, losses)
    for name_, entry in entries.items():
        if name_ not in ("metadata.json", "tasks") and not (entry.type_str == "tree" and name_ in folders):
            losses.append(SourceLoss("unknown_file", f"{name_} is not a file Entire documents; kept unread",
                                     cid, None, location.path(name_)))
    return Checkpoint(cid, location, metadata, sessions, losses)


def _listed_folder(path: str, cid: str, location: CheckpointLocation) -> str | None:
    # Listed paths are absolute in the commit tree: "/ab/cdef012345/0/metadata.json" on the v1 branch,
    # "/0/metadata.json" under a ref; a checkpoint migrated from v1 to a ref may keep the v1 form.
    parts = path.strip("/").split("/")
    for base in ([], [cid[:2], cid[2:]]) if not location.base else (location.base.split("/"),):
        if len(parts) == len(base) + 2 and parts[: len(base)] == base:
            return parts[len(base)]
    return None


def _read_session(
    repo: pygit2.Repository, cid: str, location: CheckpointLocation, folder: str, entry: pygit2.Object
) -> SessionEntry:
    session = SessionEntry(cid, location, folder, location.path(folder))
    tree = _subtree(repo, entry, session.path, cid, folder, session.losses)
    if tree is None:
        return session
    chunks = []
    for child in sorted(tree, key=lambda e: e.name):
        path = f"{session.path}/{child.name}"
        if child.type_str == "tree":
            if child.name == "tasks":  # auto-commit era: the session's own .entire/metadata copy
                session.tasks.extend(read_tasks(repo, child, path, cid, session.losses))
            else:
                session.unknown.extend(_walk_files(repo, child, path, cid, folder, session.losses))
            continue
        file = FileEntry(path, str(child.id), blob_size(repo, child.id))
        if child.name in KNOWN_SESSION_FILES:
            session.files[KNOWN_SESSION_FILES[child.name]] = file
        elif chunk := CHUNK.match(child.name):
            chunks.append((int(chunk.group(1)), file))
        else:
            session.unknown.append(file)
    session.chunks = [f for _, f in sorted(chunks, key=lambda c: c[0])]
    meta_file = session.files.get("metadata")
    if meta_file is None:
        session.losses.append(SourceLoss("missing_metadata", "the session folder has no metadata.json", cid, folder,
                                         f"{session.path}/metadata.json"))
    else:
        session.metadata = _read_json_entry(repo, meta_file, cid, folder, session.losses)
    for file in (*session.files.values(), *session.chunks):
        if file.size is None and file is not meta_file:  # metadata.json: reported when read above
            session.losses.append(SourceLoss("missing_blob", absent_blob(file.blob_id), cid, folder, file.path))
    return session


def _subtree(
    repo: pygit2.Repository, entry: pygit2.Object, path: str, cid: str, folder: str | None, losses: list[SourceLoss]
) -> pygit2.Tree | None:
    """The tree a tree entry names, or None (a declared loss) when it is absent."""
    tree = tree_or_none(repo, entry)
    if tree is None:
        losses.append(SourceLoss("missing_blob", f"tree {entry.id} is absent from the repository", cid, folder, path))
    return tree


def _walk_files(
    repo: pygit2.Repository, entry: pygit2.Object, path: str, cid: str, folder: str | None, losses: list[SourceLoss]
) -> list[FileEntry]:
    tree = _subtree(repo, entry, path, cid, folder, losses)
    out = []
    for child in sorted(tree or (), key=lambda e: e.name):
        child_path = f"{path}/{child.name}"
        if child.type_str == "tree":
            out.extend(_walk_files(repo, child, child_path, cid, folder, losses))
        elif child.type_str == "blob":
            out.append(FileEntry(child_path, str(child.id), blob_size(repo, child.id)))
    return out


def read_tasks(
    repo: pygit2.Repository, entry: pygit2.Object, path: str, cid: str, losses: list[SourceLoss]
) -> list[TaskEntry]:
    tasks = []
    for child in sorted(_subtree(repo, entry, path, cid, None, losses) or (), key=lambda e: e.name):
        if child.type_str != "tree":
            losses.append(SourceLoss("unknown_file", f"{child.name} in tasks/ is not a task folder; kept unread",
                                     cid, None, f"{path}/{child.name}"))
            continue
        task = TaskEntry(child.name, f"{path}/{child.name}")
        for file in _walk_files(repo, child, task.path, cid, None, losses):
            name = file.path.rsplit("/", 1)[1]
            top_level = file.path.count("/") == task.path.count("/") + 1
            if top_level and name.startswith("agent-") and name.endswith(".jsonl"):
                task.transcripts.append(file)
            elif top_level and name == "task.json":
                task.task_json = file
            else:
                task.other.append(file)
        tasks.append(task)
    return tasks


def _assign_tasks(
    repo: pygit2.Repository, tasks: list[TaskEntry], sessions: list[SessionEntry], cid: str, losses: list[SourceLoss]
) -> None:
    """Give each checkpoint-level task folder to the session it belongs to.

    A checkpoint with one session owns all of them; otherwise the session named by the task's
    task.json or legacy checkpoint.json (session_id), else the session whose transcript holds the
    tool use ID. A task that matches no session stays unread, as a declared loss."""
    if len(sessions) == 1:
        sessions[0].tasks.extend(tasks)
        return
    by_id = {s.session_id: s for s in sessions if s.session_id}
    for task in tasks:
        owner = None
        for file in [task.task_json, *task.other]:
            if file is not None and file.path.endswith(("/task.json", "/checkpoint.json")):
                data = json_or_none(read_blob(repo, pygit2.Oid(hex=file.blob_id)))
                sid = data.get("session_id") if isinstance(data, dict) else None
                if sid in by_id:
                    owner = by_id[sid]
                    break
        if owner is None:
            needle = task.tool_use_id.encode()
            for session in sessions:
                if any(needle in (read_blob(repo, pygit2.Oid(hex=f.blob_id)) or b"")
                       for f in [session.files.get("transcript"), *session.chunks] if f is not None):
                    owner = session
                    break
        if owner is None:
            losses.append(SourceLoss("unassigned_task", f"subagent record {task.tool_use_id} names no session of the "
                                     "checkpoint and no session transcript holds its tool use ID", cid, None, task.path))
            continue
        owner.tasks.append(task)


def _read_json(
    repo: pygit2.Repository, entry: pygit2.Object, path: str, cid: str, folder: str | None, losses: list[SourceLoss]
) -> dict | None:
    return _read_json_entry(repo, FileEntry(path, str(entry.id), blob_size(repo, entry.id)), cid, folder, losses)


def _read_json_entry(
    repo: pygit2.Repository, file: FileEntry, cid: str, folder: str | None, losses: list[SourceLoss]
) -> dict | None:
    data = read_blob(repo, pygit2.Oid(hex=file.blob_id))
    if data is None:
        losses.append(SourceLoss("missing_blob", absent_blob(file.blob_id), cid, folder, file.path))
        return None
    parsed = json_or_none(data)
    if not isinstance(parsed, dict):
        losses.append(SourceLoss("corrupt_metadata", "not a JSON object: " + first_bytes(data), cid, folder, file.path))
        return None
    return parsed


def json_or_none(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def absent_blob(blob_id: str) -> str:
    return f"blob {blob_id} is absent from the repository (a partial clone, a mirror without large blobs, or pruned)"


def first_bytes(data: bytes) -> str:
    return repr(data[:60].decode("utf-8", "replace"))
