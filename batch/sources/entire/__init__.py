"""Entire checkpoints stored in Git: enumerate checkpoints and sessions, load a session's bytes.

Storage (see docs/architecture.md, "Entire checkpoints"):
- the branch `entire/checkpoints/v1` (and its remote-tracking copies): one checkpoint per subtree
  `<id[:2]>/<id[2:]>/`, read at the branch tip;
- one ref per checkpoint `refs/entire/checkpoints/<shard>/<id>` (shard = the id's last two
  characters): the tip commit's root tree is the checkpoint.
A checkpoint holds a summary `metadata.json`, one folder per session (`0/`, `1/`, ... not always
contiguous) and `tasks/<tool use id>/` subagent records. Every checkpoint stores the whole
session so far, so one session appears in several checkpoints.

Reading is in two steps so that memory stays bounded: `scan_checkpoints` reads only the small
metadata blobs and lists every other blob with its id and size; `load_session` then reads the
blobs of one session. Nothing unreadable stops the scan: absent blobs, corrupt JSON and hash
mismatches become `SourceLoss` entries naming the checkpoint, the session and the path.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pygit2

from batch.sources.git import OBJECT_ERRORS, blob_size, peel_commit, read_blob, ref_names, repository_name

V1_BRANCH = "refs/heads/entire/checkpoints/v1"
V1_REMOTE = re.compile(r"^refs/remotes/[^/]+/entire/checkpoints/v1$")
CHECKPOINT_REF = re.compile(r"^refs/entire/checkpoints/([^/]{2})/([^/]+)$")
HEX_ID = re.compile(r"^[0-9a-f]{12}$")
# ULID: 26 characters of Crockford base32 in canonical uppercase, first one 0-7 (48-bit time prefix)
ULID_ID = re.compile(r"^[0-7][0-9ABCDEFGHJKMNPQRSTVWXYZ]{25}$")
TRAILER = re.compile(r"^Entire-Checkpoint:[ \t]*([0-9a-f]{12}|[0-7][0-9ABCDEFGHJKMNPQRSTVWXYZ]{25})[ \t]*$", re.M)
CHUNK = re.compile(r"^full\.jsonl\.(\d+)$")
DATED_SESSION = re.compile(r"^\d{4}-\d{2}-\d{2}-(.+)$")
# The agent whose native transcript (full.jsonl) a converter of this project reads.
NATIVE_AGENTS = {"Claude Code": "claude-code-jsonl"}
KNOWN_SESSION_FILES = {
    "metadata.json": "metadata",
    "full.jsonl": "transcript",
    "transcript.jsonl": "compact_transcript",
    "prompt.txt": "prompt",
    "content_hash.txt": "content_hash",
    "context.md": "context",
}


def is_checkpoint_id(value: str) -> bool:
    """Tell whether `value` is a checkpoint ID: 12 lowercase hex characters or a canonical ULID."""
    return bool(HEX_ID.match(value) or ULID_ID.match(value))


@dataclass(frozen=True)
class Provenance:
    """Where a blob came from."""

    repository: str  # name of the repository folder
    ref: str  # full reference name read
    commit_id: str  # tip commit of that reference
    checkpoint_id: str
    path: str  # tree path from the commit's root tree
    blob_id: str


@dataclass(frozen=True)
class SourceLoss:
    """Something a checkpoint should hold and that could not be read, or was read and is wrong."""

    category: str  # missing_blob, hash_mismatch, corrupt_metadata, missing_metadata, unsupported_agent, ...
    detail: str
    checkpoint_id: str
    session: str | None  # session folder name ("0"), or None for the checkpoint as a whole
    path: str | None  # tree path from the commit root


@dataclass(frozen=True)
class FileEntry:
    """A blob named by a checkpoint tree, not read yet."""

    path: str  # tree path from the commit root
    blob_id: str
    size: int | None  # None when the blob is absent from the object database


@dataclass
class TaskEntry:
    """A `tasks/<tool use id>/` folder: a subagent record of the checkpoint."""

    tool_use_id: str
    path: str
    transcripts: list[FileEntry] = field(default_factory=list)  # agent-<agent id>.jsonl
    task_json: FileEntry | None = None
    other: list[FileEntry] = field(default_factory=list)  # legacy checkpoint.json, checkpoints/NNN-*.json, unknown


@dataclass
class SessionEntry:
    """A session folder of a checkpoint: its metadata read, its other blobs listed."""

    checkpoint_id: str
    location: CheckpointLocation
    folder: str  # folder name in the checkpoint: "0", "1", ...
    path: str  # tree path of the folder from the commit root
    metadata: dict | None = None
    files: dict[str, FileEntry] = field(default_factory=dict)  # role -> file (metadata, transcript, ...)
    chunks: list[FileEntry] = field(default_factory=list)  # full.jsonl.001, ... in numeric order
    unknown: list[FileEntry] = field(default_factory=list)  # any other file under the folder
    tasks: list[TaskEntry] = field(default_factory=list)
    losses: list[SourceLoss] = field(default_factory=list)

    @property
    def session_id(self) -> str | None:
        """The session ID as stored in metadata.json."""
        value = (self.metadata or {}).get("session_id")
        return value if isinstance(value, str) and value else None

    @property
    def session_key(self) -> str:
        """The session this folder belongs to across checkpoints: the session ID without a legacy date prefix.

        A folder without a session ID is its own session: `<checkpoint id>/<folder>`."""
        sid = self.session_id
        if sid is None:
            return f"{self.checkpoint_id}/{self.folder}"
        dated = DATED_SESSION.match(sid)
        return dated.group(1) if dated else sid

    @property
    def agent(self) -> str | None:
        value = (self.metadata or {}).get("agent")
        return value if isinstance(value, str) and value else None

    @property
    def created_at(self) -> datetime | None:
        """metadata.json created_at as a UTC instant (older data has local offsets)."""
        return parse_time((self.metadata or {}).get("created_at"))

    @property
    def transcript_start(self) -> int | None:
        """First line of full.jsonl this checkpoint covers: checkpoint_transcript_start, else the
        deprecated transcript_lines_at_start; None when neither is written (Entire omits 0)."""
        for key in ("checkpoint_transcript_start", "transcript_lines_at_start"):
            value = (self.metadata or {}).get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    @property
    def compact_transcript_start(self) -> int | None:
        """First transcript.jsonl line this checkpoint covers; None (absent) means the file holds only this
        checkpoint's part (legacy), which differs from 0."""
        value = (self.metadata or {}).get("compact_transcript_start")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def size(self) -> int:
        """Bytes of the blobs load_session reads (absent blobs count 0)."""
        entries = [*self.files.values(), *self.chunks, *(t for task in self.tasks for t in task.transcripts)]
        return sum(e.size or 0 for e in entries)


@dataclass(frozen=True)
class CheckpointLocation:
    """The reference and tree a checkpoint was read from."""

    repository: str
    ref: str
    commit_id: str
    base: str  # tree path of the checkpoint from the commit root: "ab/cdef012345" on v1, "" for a ref

    def path(self, *parts: str) -> str:
        return "/".join(p for p in (self.base, *parts) if p)


@dataclass
class Checkpoint:
    """One checkpoint, read from the location the routing rules chose."""

    checkpoint_id: str
    location: CheckpointLocation
    metadata: dict | None
    sessions: list[SessionEntry]
    losses: list[SourceLoss] = field(default_factory=list)
    shadowed: list[str] = field(default_factory=list)  # other references holding this ID, not read


@dataclass
class Scan:
    """What scan_checkpoints found."""

    repository: str
    checkpoints: list[Checkpoint] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (ref or tree path, why)

    @property
    def losses(self) -> list[SourceLoss]:
        return [loss for c in self.checkpoints for loss in c.losses] + [
            loss for c in self.checkpoints for s in c.sessions for loss in s.losses
        ]


@dataclass(frozen=True)
class Blob:
    """Bytes of one logical file, and the stored blobs they were read from (chunks: several, in order)."""

    data: bytes
    provenance: tuple[Provenance, ...]


@dataclass
class TaskUnit:
    """A subagent record with its bytes."""

    tool_use_id: str
    transcripts: list[Blob]  # agent-<agent id>.jsonl files, by path
    task: dict | None  # task.json, parsed
    task_provenance: Provenance | None
    other: list[Blob]  # legacy checkpoint.json and checkpoints/*.json, unknown files


@dataclass
class SessionUnit:
    """A unit of work: one session of one checkpoint, with its bytes and where they came from."""

    entry: SessionEntry
    transcript: Blob | None  # full.jsonl with its chunks joined
    compact_transcript: Blob | None  # transcript.jsonl (Entire Transcript Format v1)
    prompt: Blob | None
    context: Blob | None  # legacy context.md
    tasks: list[TaskUnit]
    unknown: list[Blob]
    content_hash: str | None  # content_hash.txt as stored
    content_hash_ok: bool | None  # None when there is no hash or no transcript to check
    native_format: str | None  # producer source of the converter for `transcript`, None when none applies
    losses: list[SourceLoss]

    @property
    def checkpoint_id(self) -> str:
        return self.entry.checkpoint_id

    @property
    def session_key(self) -> str:
        return self.entry.session_key


@dataclass(frozen=True)
class CommitLink:
    """An `Entire-Checkpoint:` trailer of a commit."""

    commit_id: str
    checkpoint_id: str
    index: int  # 0-based position among the commit's trailers


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 string as a UTC datetime, or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


# ---------------------------------------------------------------------------------------------
# Enumeration


def scan_checkpoints(repo: pygit2.Repository) -> Scan:
    """Enumerate the checkpoints of a repository, routed as Entire reads them, with their sessions.

    Routing when one ID is in several places: a per-checkpoint ref first (ULIDs live only there,
    12-hex IDs there once migrated), then the `entire/checkpoints/v1` branch, then its
    remote-tracking copies; when several v1 copies differ, the one whose newest session metadata
    is most recent wins. The references not read are listed in `Checkpoint.shadowed`.
    """
    name = repository_name(repo)
    scan = Scan(name)
    candidates: dict[str, list[tuple[tuple, Checkpoint]]] = {}
    for ref in ref_names(repo):
        shape = CHECKPOINT_REF.match(ref)
        if ref == V1_BRANCH or V1_REMOTE.match(ref):
            rank = 1 if ref == V1_BRANCH else 2
            for checkpoint in _read_branch(repo, name, ref, scan):
                newest = max((s.created_at for s in checkpoint.sessions if s.created_at), default=None)
                # a more recent copy first; then the local branch before remote-tracking ones
                key = (1, -(newest.timestamp() if newest else float("-inf")), rank, ref)
                candidates.setdefault(checkpoint.checkpoint_id, []).append((key, checkpoint))
        elif shape:
            shard, cid = shape.groups()
            if not is_checkpoint_id(cid) or shard.lower() != cid[-2:].lower():
                if ref.startswith("refs/entire/checkpoints/v"):
                    continue  # v1/*, v2/* storage refs: not per-checkpoint refs
                scan.skipped.append((ref, "not a per-checkpoint ref: the shard is not the ID's last two characters"))
                continue
            commit = peel_commit(repo, ref)
            if commit is None:
                scan.skipped.append((ref, "does not point to a commit"))
                continue
            location = CheckpointLocation(name, ref, str(commit.id), "")
            checkpoint = _read_checkpoint(repo, cid, location, commit.tree)
            candidates.setdefault(cid, []).append(((0, 0.0, 0, ref), checkpoint))
    for cid in sorted(candidates):
        ranked = sorted(candidates[cid], key=lambda kc: kc[0])
        chosen = ranked[0][1]
        chosen.shadowed = [c.location.ref for _, c in ranked[1:]]
        scan.checkpoints.append(chosen)
    return scan


def _read_branch(repo: pygit2.Repository, name: str, ref: str, scan: Scan) -> Iterator[Checkpoint]:
    commit = peel_commit(repo, ref)
    if commit is None:
        scan.skipped.append((ref, "does not point to a commit"))
        return
    for top in sorted(commit.tree, key=lambda e: e.name):
        if top.type_str != "tree" or len(top.name) != 2:
            if top.type_str == "tree" or top.name not in ("README.md", ".gitkeep"):
                scan.skipped.append((f"{ref}:{top.name}", "not a checkpoint shard folder"))
            continue
        shard = _tree_or_none(repo, top)
        if shard is None:
            scan.skipped.append((f"{ref}:{top.name}", f"tree {top.id} is absent from the repository"))
            continue
        for sub in sorted(shard, key=lambda e: e.name):
            cid = top.name + sub.name
            if sub.type_str != "tree" or not is_checkpoint_id(cid):
                scan.skipped.append((f"{ref}:{top.name}/{sub.name}", "not a checkpoint folder"))
                continue
            location = CheckpointLocation(name, ref, str(commit.id), f"{top.name}/{sub.name}")
            tree = _tree_or_none(repo, sub)
            if tree is None:
                yield Checkpoint(cid, location, None, [], [SourceLoss(
                    "missing_blob", f"tree {sub.id} of the checkpoint is absent from the repository", cid, None,
                    location.base,
                )])
                continue
            yield _read_checkpoint(repo, cid, location, tree)


def _tree_or_none(repo: pygit2.Repository, entry: pygit2.Object) -> pygit2.Tree | None:
    try:
        return repo[entry.id]
    except OBJECT_ERRORS:
        return None


def _read_checkpoint(repo: pygit2.Repository, cid: str, location: CheckpointLocation, tree: pygit2.Tree) -> Checkpoint:
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
        tasks = _read_tasks(repo, entries["tasks"], location.path("tasks"), cid, losses)
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
                session.tasks.extend(_read_tasks(repo, child, path, cid, session.losses))
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
            session.losses.append(SourceLoss("missing_blob", _absent(file.blob_id), cid, folder, file.path))
    return session


def _subtree(
    repo: pygit2.Repository, entry: pygit2.Object, path: str, cid: str, folder: str | None, losses: list[SourceLoss]
) -> pygit2.Tree | None:
    """The tree a tree entry names, or None (a declared loss) when it is absent."""
    tree = _tree_or_none(repo, entry)
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


def _read_tasks(
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
                data = _json_or_none(read_blob(repo, pygit2.Oid(hex=file.blob_id)))
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
        losses.append(SourceLoss("missing_blob", _absent(file.blob_id), cid, folder, file.path))
        return None
    parsed = _json_or_none(data)
    if not isinstance(parsed, dict):
        losses.append(SourceLoss("corrupt_metadata", "not a JSON object: " + _first_bytes(data), cid, folder, file.path))
        return None
    return parsed


def _json_or_none(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def _absent(blob_id: str) -> str:
    return f"blob {blob_id} is absent from the repository (a partial clone, a mirror without large blobs, or pruned)"


def _first_bytes(data: bytes) -> str:
    return repr(data[:60].decode("utf-8", "replace"))


# ---------------------------------------------------------------------------------------------
# Selection


def select_sessions(scan: Scan, *, combine: bool = False) -> list[SessionEntry]:
    """Choose the session folders to convert.

    By default the newest checkpoint of each session (every checkpoint stores the whole session
    so far): the latest metadata created_at, then the larger transcript start, then the larger
    checkpoint ID. With `combine`, every checkpoint of every session, oldest first, so that a
    later step can tell from each one's transcript start which records it covered.
    Sessions are returned ordered by session key."""
    groups: dict[str, list[SessionEntry]] = {}
    for checkpoint in scan.checkpoints:
        for session in checkpoint.sessions:
            groups.setdefault(session.session_key, []).append(session)
    out: list[SessionEntry] = []
    for key in sorted(groups):
        ordered = sorted(groups[key], key=_recency)
        out.extend(ordered if combine else ordered[-1:])
    return out


def _recency(session: SessionEntry) -> tuple:
    created = session.created_at
    return (
        created is not None,
        created.timestamp() if created else 0.0,
        session.transcript_start or 0,
        session.checkpoint_id,
        session.folder,
    )


# ---------------------------------------------------------------------------------------------
# Loading one session


def load_session(repo: pygit2.Repository, session: SessionEntry) -> SessionUnit:
    """Read the blobs of one session folder (and its subagent records) into a unit of work."""
    cid, folder = session.checkpoint_id, session.folder
    losses = list(session.losses)

    def provenance(file: FileEntry) -> Provenance:
        loc = session.location
        return Provenance(loc.repository, loc.ref, loc.commit_id, cid, file.path, file.blob_id)

    def read(file: FileEntry | None) -> Blob | None:
        if file is None:
            return None
        data = read_blob(repo, pygit2.Oid(hex=file.blob_id))
        if data is None:
            if not any(loss.path == file.path and loss.category == "missing_blob" for loss in losses):
                losses.append(SourceLoss("missing_blob", _absent(file.blob_id), cid, folder, file.path))
            return None
        return Blob(data, (provenance(file),))

    # a transcript with an absent chunk is not read at all (each absent blob is a declared loss)
    transcript = _join_chunks([read(session.files.get("transcript")), *(read(c) for c in session.chunks)])
    content_hash, hash_ok = None, None
    hash_blob = read(session.files.get("content_hash"))
    if hash_blob is not None:
        content_hash = hash_blob.data.decode("utf-8", "replace").strip()
        if transcript is not None:
            hash_ok = _hash_matches(content_hash, transcript.data, chunked=bool(session.chunks))
            if not hash_ok:
                losses.append(SourceLoss(
                    "hash_mismatch",
                    f"content_hash.txt says {content_hash[:80]}, the transcript hashes to "
                    f"sha256:{hashlib.sha256(transcript.data).hexdigest()}: it changed after Entire stored it; "
                    "converted as stored, its integrity unverified",
                    cid, folder, f"{session.path}/content_hash.txt",
                ))
    tasks = []
    for task in session.tasks:
        task_json_blob = read(task.task_json)
        task_data = _json_or_none(task_json_blob.data) if task_json_blob else None
        if task_json_blob is not None and not isinstance(task_data, dict):
            losses.append(SourceLoss("corrupt_metadata", "task.json is not a JSON object: "
                                     + _first_bytes(task_json_blob.data), cid, folder, task.task_json.path))
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
    starts with a JSON object carrying a `type`) go to the Claude Code converter."""
    if transcript is None:
        return None
    agent = session.agent
    if agent is not None:
        return NATIVE_AGENTS.get(agent)
    first = next((line for line in transcript.data[:1 << 16].split(b"\n") if line.strip()), b"")
    obj = _json_or_none(first)
    return "claude-code-jsonl" if isinstance(obj, dict) and isinstance(obj.get("type"), str) else None


def iter_units(repo: pygit2.Repository, *, combine: bool = False) -> Iterator[SessionUnit]:
    """Scan, select and load: one unit of work per selected session, read when it is reached."""
    for session in select_sessions(scan_checkpoints(repo), combine=combine):
        yield load_session(repo, session)


# ---------------------------------------------------------------------------------------------
# Commits that name checkpoints


def scan_trailers(repo: pygit2.Repository) -> list[CommitLink]:
    """Every `Entire-Checkpoint:` trailer in the history of every branch, Entire's own branches excepted.

    Local and remote-tracking branches are walked together, each commit once; a commit can carry
    several trailers (squashed or redone commits). Branches under `entire/` (checkpoints, shadow
    snapshots, trails) are Entire's storage, not code history. Ordered by commit ID, then position."""
    walker = None
    for ref in ref_names(repo):
        branch = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
        if ref.startswith("refs/remotes/"):
            branch = ref.split("/", 3)[3] if ref.count("/") >= 3 else None
        if branch is None or branch.startswith("entire/") or branch == "HEAD":
            continue
        commit = peel_commit(repo, ref)
        if commit is None:
            continue
        if walker is None:
            walker = repo.walk(commit.id, pygit2.enums.SortMode.NONE)
        else:
            walker.push(commit.id)
    links = []
    for commit in walker or ():
        seen: list[str] = []
        for match in TRAILER.finditer(commit.raw_message.decode("utf-8", "replace")):
            if match.group(1) not in seen:
                seen.append(match.group(1))
        links.extend(CommitLink(str(commit.id), cid, i) for i, cid in enumerate(seen))
    return sorted(links, key=lambda link: (link.commit_id, link.index))
