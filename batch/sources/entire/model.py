"""What the Entire source reads and returns: checkpoint IDs, the entries a scan lists, the units a load fills.

A scan (scan.py) returns a `Scan` of `Checkpoint`s, each read at a `CheckpointLocation` and holding
`SessionEntry`s (metadata read, other blobs listed as `FileEntry`s, subagent records as `TaskEntry`s).
Loading one entry (load.py) gives a `SessionUnit` of `Blob`s with their `Provenance`. What could not be
read is a `SourceLoss`, never an exception. `Layout` is one way Entire stores checkpoints in Git
(scan_v1.py, scan_refs.py): which references are its own and how its checkpoints are read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pygit2

HEX_ID = re.compile(r"^[0-9a-f]{12}$")
# ULID: 26 characters of Crockford base32 in canonical uppercase, first one 0-7 (48-bit time prefix)
ULID_ID = re.compile(r"^[0-7][0-9ABCDEFGHJKMNPQRSTVWXYZ]{25}$")
DATED_SESSION = re.compile(r"^\d{4}-\d{2}-\d{2}-(.+)$")
# an Entire CLI version: the leading major.minor.patch (a git-describe suffix is ignored)
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


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
    # the reference holding the blob when it is not its session's (a v2 raw transcript: a /full ref)
    location: CheckpointLocation | None = None


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
    layout: str = "v1"  # "v1": the v1 branch or a per-checkpoint ref; "v2": Entire's v2 refs (scan_v2.py)

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
        deprecated transcript_lines_at_start; None when neither is written (Entire omits 0), and for a
        v2 session whose checkpoint_transcript_start counts lines of transcript.jsonl instead."""
        if self.v2_compact_start:
            return None
        for key in ("checkpoint_transcript_start", "transcript_lines_at_start"):
            value = (self.metadata or {}).get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    @property
    def compact_transcript_start(self) -> int | None:
        """First transcript.jsonl line this checkpoint covers; None (absent) means the file holds only this
        checkpoint's part (legacy), which differs from 0. A v2 session written by Entire 0.5.5 or later
        stores it as checkpoint_transcript_start (reference entire.md §9.3, §9.6 rule 6)."""
        key = "checkpoint_transcript_start" if self.v2_compact_start else "compact_transcript_start"
        value = (self.metadata or {}).get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def v2_compact_start(self) -> bool:
        """A v2 session whose checkpoint_transcript_start is a line of the compact transcript: written by
        Entire 0.5.5 or later; a version that does not parse (`dev`) counts as one when the session
        has a compact transcript."""
        if self.layout != "v2":
            return False
        version = VERSION.match(str((self.metadata or {}).get("cli_version") or ""))
        if version is None:
            return "compact_transcript" in self.files
        return tuple(int(x) for x in version.groups()) >= (0, 5, 5)

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
    layout: str = "v1"  # "v1", "v2", or "v1+v2" when v2 added sessions v1 lacks (scan_v2.py)
    # layout v1+v2: the root summary's aggregates recomputed from the union of the sessions (keys as in
    # metadata.json; scan_v2.reaggregate); None: `metadata` as stored gives them
    recomputed: dict | None = None


@dataclass
class Scan:
    """What scan_checkpoints found."""

    repository: str
    checkpoints: list[Checkpoint] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (ref or tree path, why)
    # losses of no checkpoint read (v2 raw transcripts whose checkpoint /main does not hold)
    unattached: list[SourceLoss] = field(default_factory=list)

    @property
    def losses(self) -> list[SourceLoss]:
        return [loss for c in self.checkpoints for loss in c.losses] + [
            loss for c in self.checkpoints for s in c.sessions for loss in s.losses
        ] + self.unattached


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
class Layout:
    """A way Entire stores checkpoints in Git, as scan_checkpoints routes among them.

    `claims(ref)` tells whether a reference belongs to the layout. `candidates(repo, name, ref, scan)`
    (name: the repository's) reads the checkpoints that reference holds, each with its routing key
    (the lowest key of an ID wins), and adds what is not a checkpoint to `scan.skipped`."""

    name: str
    claims: Callable[[str], bool]
    candidates: Callable[[pygit2.Repository, str, str, Scan], Iterable[tuple[tuple, Checkpoint]]]


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
