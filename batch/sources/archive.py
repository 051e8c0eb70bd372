"""An earlier asr-batch output read as a source: each input file it holds is rebuilt from the output's
own copy of its lines, classified as discovery classifies a file, and converted by the running version.

One mechanism carries an output across versions of asr-batch (the previous output of `--out`, whose
reuse state another version wrote), rebuilds an output into a new folder, and merges archives
(`asr-batch convert laptop-archive desktop-archive --out team`). What an output holds of each file
(docs/asr-tables.md, "An output is a source"): every non-blank line, in `source_lines` and the tables
it names (sql/archive/archive_lines.sql), and of the rest the file's size, blank lines, byte order
mark and SHA-256 in the manifest's `inputs`, a subagent's sidecar in `sessions.sidecar`. A rebuilt
file whose SHA-256 is the recorded one is the file as read; one that differs (whitespace of blank
lines, between objects of one line) is listed in the manifest's `carried.inexact`.

Sessions read from Git (Entire checkpoints) come from the output's copy of the repository's objects
(`git_refs`, `git_objects`), rebuilt as a repository that discovery reads as it read the original
(sources/entire/held.py, `HeldRepository`, `carry_repository`). A file of Entire lifecycle events is
rebuilt like a transcript, a unit per session it names (`_event_sessions`). Files an output holds
without their bytes are not rebuilt: a foreign file (not a transcript), a session read from Git by a
version that kept no copy of the objects. They are listed in `not_carried` with the reason; the
session groups among them that no input gives keep the rows the output wrote
(batch/incremental/as_written.py).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pygit2

from batch import sql
from batch.errors import OutputError, SourceError
from batch.output.folder import manifest_keys, manifest_of
from batch.output.layout import STATE
from batch.sources import claude_code, codex
from batch.sources.base import Loaded, Stream, Unit, spooled
from batch.sources.entire import held as git_held
from batch.sources.files import group_owner
from batch.version import ARCHIVE_FORMAT, VERSION

# Entire lifecycle events (formats/entire_events.py): a file holds the events of one or more sessions,
# each a unit of its own owned by the session
EVENTS = "entire-agent-events"
# the formats whose files an output holds line by line (a manifest input without `format` is Claude Code's)
REBUILT_FORMATS = (None, codex.FORMAT, EVENTS)
TABLES = ("source_lines", "records", "rejects")
# the most bytes of files rebuilt in one statement for the groups of one earlier batch (decisions/014)
SIBLING_BYTES = 16 << 20
REBUILD_MEMORY = 256 << 20
EMPTY = {
    "source_lines": "''::varchar as source_file, 0::bigint as line, 0::bigint as sub, 0::bigint as byte_offset, "
                    "0::bigint as byte_length, ''::varchar as record_id, ''::varchar as native, ''::blob as raw",
    "records": "''::varchar as record_id, ''::varchar as native, ''::varchar as source_file",
    "rejects": "''::varchar as source_file, 0::bigint as line, ''::blob as raw",
}


@dataclass(frozen=True)
class Written:
    """Who wrote an output: asr-batch's version and the archive format (0: before outputs named it)."""

    version: str
    archive_format: int

    def __str__(self) -> str:
        return f"asr-batch {self.version}" + (f" (archive format {self.archive_format})" if self.archive_format else "")


@dataclass(frozen=True)
class HeldRepository:
    """A repository of Entire checkpoints rebuilt from an output's copy of it (sources/entire/held.py),
    with the output's inputs read from it and whether its sessions were read with --all-checkpoints."""

    name: str
    path: Path
    combine: bool
    entries: tuple[dict, ...]
    owners: frozenset[str] | None  # the sessions wanted (None: all), but those `exclude`
    exclude: frozenset[str]
    was: str | None  # where the repository was when it was read


@dataclass
class Archive:
    """What an earlier output gives as a source: a unit per session group whose files it holds."""

    root: Path
    written: Written
    units: list[Unit] = field(default_factory=list)
    recorded: dict[str, str | None] = field(default_factory=dict)  # file -> the SHA-256 the output recorded
    last_read: dict[str, str | None] = field(default_factory=dict)  # owner -> when its files were last read
    not_carried: list[dict] = field(default_factory=list)  # files held without their bytes: path, session_key, reason
    # the repositories of Entire sessions rebuilt from the output's copy (`HeldRepository`), in a
    # temporary folder that lives as long as this archive
    repositories: list[HeldRepository] = field(default_factory=list)
    damaged: set[str] = field(default_factory=set)  # its part files not read

    @cached_property
    def tool_results(self) -> set[str]:
        """The tool-results/ files present when the output's runs read its files (`parts.capture_state`
        external): a rebuilt session's persisted outputs are as they were then. Read when a group is
        carried from the output (registry `_carry`), not for a file of a group that is there."""
        return _tool_results(self.root, self.damaged)


def written_by(folder: Path) -> Written | None:
    """Who wrote the output `folder` (None when it is not an asr-batch output); refuse one of a newer
    archive format, which this version cannot promise to read."""
    manifest = manifest_keys(folder.resolve(), ("producer", "archive")) if folder.is_dir() else None
    return None if manifest is None else _written(folder, manifest)


def _written(folder: Path, manifest: dict) -> Written:
    producer = manifest.get("producer") or {}
    written = Written(str(producer.get("version") or "?"), _format_of(manifest))
    if written.archive_format > ARCHIVE_FORMAT:
        raise OutputError(
            f"{folder}: written by {written}, newer than this asr-batch {VERSION} (which reads archive formats up to "
            f"{ARCHIVE_FORMAT}); nothing was changed. Upgrade asr-batch (pip install -U asr-batch) to use it."
        )
    return written


def is_output(path: Path) -> bool:
    """Whether `path` is a folder holding an asr-batch output."""
    return path.is_dir() and manifest_keys(path.resolve(), ()) is not None


def discover(
    folder: Path, *, owners: set[str] | None = None, exclude: set[str] = frozenset(), damaged: set[str] = frozenset(),
    paths: set[str] | None = None,
) -> Archive:
    """The session groups the output `folder` holds (those of `owners` when given, but those of
    `exclude`; of their files, those of `paths` when given), one unit each, whose files are rebuilt when
    its batch runs; files held without their bytes in `not_carried`. The part files `damaged` (paths in
    the output) are not read."""
    manifest = _manifest(folder)
    if manifest is None:
        raise OutputError(f"{folder}: not an asr-batch output (its manifest.json is missing or not asr-batch's).")
    folder = folder.resolve()
    archive = Archive(folder, _written(folder, manifest), damaged=set(damaged))
    inputs = [i for i in manifest.get("inputs", []) if isinstance(i, dict) and isinstance(i.get("path"), str)
              and (paths is None or i["path"] in paths)]
    # the group of a file, as its stream's key names it (`<owner>` or `<owner>/<agent>`), so that only
    # the groups wanted are read; the group its rebuilt file is classified in is checked below
    # (a key names its group whole where no `/` splits it: an Entire session named by its folder, `<id>/<n>`)
    # (a file of events names several sessions: its streams are chosen below, by their own session)
    wanted = [i for i in inputs if i.get("format") == EVENTS or (
        (owners is None or _owner(i) in owners) and not {_owner(i), i.get("session_key")} & exclude)]
    # the sessions read from Git come from the repositories the output holds, rebuilt (`carry_repository`)
    holding = git_held.held_repositories(folder, damaged) if any(i.get("provenance") for i in wanted) else set()
    rebuilt, from_git = [], {}
    for i in wanted:
        reason = None if _repository(i) in holding else _not_rebuilt(i)
        if reason:
            archive.not_carried.append({"path": i["path"], "session_key": i.get("session_key"), "reason": reason})
        elif i.get("provenance"):
            from_git.setdefault(_repository(i), []).append(i)
        else:
            rebuilt.append(i)
    if not rebuilt and not from_git:
        return archive
    state = _state(folder)
    reads = state.get("reads") if isinstance(state.get("reads"), dict) else {}
    if from_git:
        workspace = git_held.workspace(archive)
        read = {r.get("repository"): r for r in (manifest.get("entire") or {}).get("repositories", [])
                if isinstance(r, dict)}
        for name, entries in sorted(from_git.items()):
            try:
                path = git_held.rebuild(folder, name, workspace, damaged)
            except (OSError, pa.ArrowException, pygit2.GitError, SourceError) as exc:
                archive.not_carried += [{"path": e["path"], "session_key": e.get("session_key"), "reason":
                                         f"read from Git (Entire checkpoints): the output's copy of {name} is damaged "
                                         f"({exc})"} for e in entries]
                continue
            archive.repositories.append(HeldRepository(
                name, path, bool(read.get(name, {}).get("all_checkpoints")), tuple(entries),
                None if owners is None else frozenset(owners), frozenset(exclude), read.get(name, {}).get("path"),
            ))
            archive.recorded.update((e["path"], e.get("sha256")) for e in entries)
        # when each session was last read (those without a transcript, which no input names, too)
        archive.last_read.update((key, read_at(read)) for key, read in reads.items())
    if not rebuilt:
        return archive
    # the batches whose parts hold each group's rows (a group's files are read from those alone), as
    # the state lists them
    parts: dict[str, set[str]] = {}
    for b in state.get("batches") or []:
        if isinstance(b, dict) and isinstance(b.get("part"), str) and isinstance(b.get("groups"), dict):
            for owner in b["groups"]:
                parts.setdefault(owner, set()).add(b["part"])
    hinted = {_owner(i) for i in rebuilt}
    held_by = tuple(sorted({p for o in hinted for p in parts[o]})) if hinted <= parts.keys() else None
    sidecars = _sidecars(folder, damaged)
    heads = _rebuild(
        folder, rebuilt, until=claude_code.PEEK_BYTES, lines=claude_code.PEEK_LINES, parts=held_by, damaged=damaged,
    )
    sessions = _event_sessions(folder, [i["path"] for i in rebuilt if i.get("format") == EVENTS], damaged)
    streams = []
    for i in rebuilt:
        if i.get("format") == EVENTS:  # a stream per session, as discovery gives (entire_events.discover)
            streams += [Stream(i["path"], i["size"], "main", key, key, producer_source=EVENTS)
                        for key in sessions.get(i["path"]) or [i["path"]]]
        else:
            streams.append(_stream(i, heads.get(i["path"], b""), sidecars.get(i.get("session_key"))))
    entries = {i["path"]: i for i in rebuilt}
    groups: dict[str, list[Stream]] = {}
    for s in streams:
        owner = group_owner(s)  # (a stream of Entire events: its own session's, as a rollout's)
        groups.setdefault(owner, []).append(s)
    chosen = {
        owner: sorted(group, key=lambda s: s.name) for owner, group in groups.items()
        if (owners is None or owner in owners) and owner not in exclude
    }
    held = {
        owner: tuple(sorted({p for s in group for p in parts.get(_owner(entries[s.name]), ())})) or None
        for owner, group in chosen.items()
    }
    # the groups read from the same parts are rebuilt together (up to SIBLING_BYTES of them), by the
    # first of them loaded (`load`), and batched together: their units sort as their parts do
    # (`Unit.newest`, then the owner)
    siblings: list[list[dict]] = []
    sibling_of: dict[str, int] = {}
    last_parts: object = False
    for owner in sorted(chosen, key=lambda o: (held[o] or (), o)):
        if held[owner] != last_parts or sum(e["size"] for e in siblings[-1]) >= SIBLING_BYTES:
            siblings.append([])
            last_parts = held[owner]
        siblings[-1].extend(entries[s.name] for s in chosen[owner] if entries[s.name] not in siblings[-1])
        sibling_of[owner] = len(siblings) - 1
    for owner, group in sorted(chosen.items()):
        archive.units.append(Unit(
            owner, sum(s.size for s in group),
            partial(load, folder, tuple(group), tuple(entries[s.name] for s in group), held[owner],
                    tuple(siblings[sibling_of[owner]])),
            label=f"{owner} (from {folder.name})",
            # the files by name, size and recorded SHA-256: an output rebuilt again converts nothing again
            fingerprint=tuple((s.name, s.size, entries[s.name].get("sha256")) for s in group),
            newest=sibling_of[owner],
        ))
        archive.last_read[owner] = read_at(reads.get(owner))
    archive.recorded.update((i["path"], i.get("sha256")) for i in rebuilt)
    return archive


def carry_repository(archive: Archive, repository: HeldRepository, units: list[Unit], summary: dict) -> None:
    """Take the `units` discovery found in a repository rebuilt from `archive` (its sessions wanted, as
    `discover` was asked); the inputs of a session the rebuilt repository does not give (a checkpoint
    no longer under the references last read) go to `not_carried`. Its `summary` (the manifest's
    `entire.repositories`) names where the repository was, and the output it was rebuilt from."""
    summary.update(path=repository.was, rebuilt_from=str(archive.root))
    keys = {e["path"]: {_owner(e), e.get("session_key")} for e in repository.entries}
    taken = {u.owner for u in units if (repository.owners is None or u.owner in repository.owners)
             and u.owner not in repository.exclude}
    archive.units += [u for u in units if u.owner in taken]
    archive.not_carried += [
        {"path": e["path"], "session_key": e.get("session_key"),
         "reason": "read from Git (Entire checkpoints): its checkpoint is not under the references the output holds"}
        for e in repository.entries if not keys[e["path"]] & taken
    ]


def _event_sessions(folder: Path, files: list[str], damaged: set[str]) -> dict[str, list[str]]:
    """The sessions each file of lifecycle events names, in the order of their first line (from its
    `source_lines`)."""
    parts = part_files(folder, "source_lines", damaged)
    if not files or not parts:
        return {}
    rows = (
        pl.scan_parquet(parts).filter(pl.col("source_file").is_in(files) & pl.col("session_key").is_not_null())
        .group_by("source_file", "session_key").agg(first=pl.col("line").min()).sort("source_file", "first")
        .collect()
    )
    sessions: dict[str, list[str]] = {}
    for name, key, _ in rows.iter_rows():
        sessions.setdefault(name, []).append(key)
    return sessions


def read_at(read: object) -> str | None:
    return read[0] if isinstance(read, list) and read and isinstance(read[0], str) else None


def _repository(entry: dict) -> str | None:
    """The repository a manifest input was read from (its provenance), None for a file."""
    provenance = entry.get("provenance")
    return provenance[0].get("repository") if isinstance(provenance, list) and provenance and isinstance(
        provenance[0], dict) else None


def _owner(entry: dict) -> str:
    """The group a manifest input's stream key names: `<owner>` or `<owner>/<agent>`."""
    return str(entry.get("session_key") or entry["path"]).split("/", 1)[0]


def load(
    folder: Path, streams: tuple[Stream, ...], entries: tuple[dict, ...], parts: tuple[str, ...] | None,
    siblings: tuple[dict, ...] = (),
) -> Loaded:
    """A unit of an archive: its streams with their bytes, rebuilt from the output `folder` (from its
    batches' `parts` when the output's state names them, else from every part). The files of the
    other groups read from the same parts (`siblings`) are rebuilt with them, once, and kept for their
    own loads in this thread: the last set only, so at most one earlier batch's rebuilt files are held."""
    names = {e["path"] for e in entries}
    key = (str(folder), parts)
    held = getattr(_held, "files", None)
    if held is None or held.key != key or not names <= held.keys():
        wanted = list(siblings) if names <= {e["path"] for e in siblings} else list(entries)
        held = _held.files = _Spooled(key, _rebuild(folder, wanted, parts=parts, spool=True))
    return Loaded([spooled(s, held.pop(s.name)) for s in streams])


class _Spooled(dict):
    """Rebuilt files not loaded yet, by name: the descriptors of unnamed temporary files, closed when dropped."""

    def __init__(self, key: tuple, files: dict[str, int]) -> None:
        super().__init__(files)
        self.key = key

    def __del__(self) -> None:
        for fd in self.values():
            os.close(fd)


_held = threading.local()  # the files `load` rebuilt for the groups of one set of parts, not loaded yet


def _not_rebuilt(entry: dict) -> str | None:
    """Why the output holds the file of a manifest input without its bytes, or None when it holds them."""
    if entry.get("provenance"):
        return ("read from Git (Entire checkpoints), and the output holds no intact copy of the repository's objects "
                "(written by asr-batch 0.3.0 or earlier, or its git_refs or git_objects part damaged): convert the "
                "repository again")
    if entry.get("format") not in REBUILT_FORMATS:
        return f"a {entry.get('format')} file: its lines are not held in source_lines"
    if entry.get("status") == "foreign":
        return "not a transcript (foreign file): the output holds none of its bytes"
    if entry.get("status") not in ("converted", "empty") or not isinstance(entry.get("size"), int):
        return f"not converted ({entry.get('status')})"
    return None


def _stream(entry: dict, head: bytes, sidecar: str | None) -> Stream:
    """The stream of a rebuilt file, classified from its name and first bytes as discovery classifies a file."""
    name, size = entry["path"], entry["size"]
    agent_id, session_id = claude_code.head_ids(head[: claude_code.PEEK_BYTES])
    stream = claude_code.classify(name, name, size, agent_id, session_id, lambda: sidecar)
    # as `codex.split`: a file whose head names a Claude Code session is no rollout
    meta = None if session_id is not None else codex.meta_of(head.split(b"\n", 1)[0].removeprefix(codex.BOM))
    return codex.rollout_stream(stream, meta) if meta is not None else stream


def _rebuild(
    folder: Path, entries: list[dict], *, until: int | None = None, lines: int | None = None,
    parts: tuple[str, ...] | None = None, damaged: set[str] = frozenset(), spool: bool = False,
) -> dict[str, bytes] | dict[str, int]:
    """The bytes of each file of `entries` (manifest inputs) as the output `folder` holds them; with
    `until` and `lines`, only its first `lines` lines that start before that byte offset; from the
    batches `parts` alone when given (and all there). With `spool`, each file is written to an unnamed
    temporary file (removed once closed) instead of being held in memory."""
    wanted = pl.DataFrame(
        {
            "source_file": [e["path"] for e in entries],
            "size": [e["size"] for e in entries],
            "blank_lines": [int(e.get("blank_lines") or 0) for e in entries],
            "bom": [bool(e.get("byte_order_mark")) for e in entries],
            "until": [min(e["size"], until) if until is not None else e["size"] for e in entries],
            "max_line": [lines] * len(entries),
        },
        schema={
            "source_file": pl.String, "size": pl.Int64, "blank_lines": pl.Int64, "bom": pl.Boolean, "until": pl.Int64,
            "max_line": pl.Int64,
        },
    )
    con = duckdb.connect()
    try:
        sql.set_memory_limit(con, REBUILD_MEMORY)  # beside another worker's batch (docs/performance.md)
        con.execute("set temp_directory = $path", {"path": tempfile.gettempdir()})
        con.execute("set threads = 1")
        con.register("wanted", wanted)
        for table in TABLES:
            files = part_files(folder, table, damaged)
            named = [str(folder / table / f"part-{part}.parquet") for part in parts or ()]
            if parts and set(named) <= set(files):
                files = named
            if files:
                con.read_parquet(files, union_by_name=True).create_view(table)
            else:  # an output without rejects (or records): the columns read, no rows
                con.execute(f'create view "{table}" as select {EMPTY[table]} limit 0')
        pieces = sql.within_limit(con, lambda: sql.frame(con, "archive_lines"))
    finally:
        con.close()
    out = {}
    for (name,), rows in pieces.group_by("source_file", maintain_order=True):
        column = rows.get_column("piece").to_arrow()
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        # the values are back to back in the array's data buffer: the file is its slice, copied once
        offsets = memoryview(column.buffers()[1]).cast("q")
        start, end = offsets[column.offset], offsets[column.offset + len(column)]
        data = memoryview(column.buffers()[2])[start:end] if end > start else memoryview(b"")
        out[name] = _spool(data) if spool else data.tobytes()
    if spool:  # a file without lines is empty
        out.update((e["path"], _spool(memoryview(b""))) for e in entries if e["path"] not in out)
    return out


def _spool(data: memoryview) -> int:
    """The descriptor of an unnamed temporary file (removed once closed) holding `data`."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        return os.dup(f.fileno())


def part_files(folder: Path, table: str, damaged: set[str]) -> list[str]:
    """The part files of a table of the output `folder`, but those `damaged`."""
    return sorted(str(p) for p in (folder / table).glob("*.parquet") if f"{table}/{p.name}" not in damaged)


def _sidecars(folder: Path, damaged: set[str]) -> dict[str, str]:
    """Each subagent stream's sidecar as the output holds it (`sessions.sidecar`), by session key."""
    files = part_files(folder, "sessions", damaged)
    if not files:
        return {}
    frame = pl.scan_parquet(files)
    if "sidecar" not in frame.collect_schema().names():
        return {}
    rows = frame.filter(pl.col("sidecar").is_not_null()).select("session_key", "sidecar").collect()
    return dict(rows.iter_rows())


def _tool_results(folder: Path, damaged: set[str]) -> set[str]:
    """The names of the tool-results/ files an output's conversions found (`parts.persisted_file` of
    the parts whose capture state is external)."""
    files = part_files(folder, "parts", damaged)
    if not files:
        return set()
    frame = pl.scan_parquet(files)
    if not {"persisted_file", "capture_state"} <= set(frame.collect_schema().names()):
        return set()
    names = frame.filter(pl.col("capture_state") == "external").select(pl.col("persisted_file").drop_nulls().unique())
    return set(names.collect().get_column("persisted_file").to_list())


def _manifest(folder: Path) -> dict | None:
    return manifest_of(folder.resolve()) if folder.is_dir() else None


def state_reads(folder: Path) -> dict:
    """When each group's files were last read, and whether they were found, as the output's reuse
    state says (whatever version wrote it): owner -> [read at, found]."""
    reads = _state(folder).get("reads")
    return reads if isinstance(reads, dict) else {}


def _state(folder: Path) -> dict:
    """The output's reuse state, whatever version wrote it, as JSON."""
    try:
        state = json.loads((folder / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _format_of(manifest: dict) -> int:
    value = (manifest.get("archive") or {}).get("format") if isinstance(manifest.get("archive"), dict) else None
    return value if isinstance(value, int) else 0
