"""Entire checkpoints as units of work: which converter reads each session's bytes, and what only Entire records.

Discovery (`discover`) reads a repository's metadata blobs only (batch.sources.entire.scan_checkpoints)
and yields one unit per session; a unit's blobs are read when its batch runs (`load_session`).
Per session, in order of preference (companion, "Import"):
- a Claude Code `full.jsonl` (chunks joined) is a stream for the Claude Code converter, with content
  level redacted and `_meta["io.entire/checkpoint"]`; each `tasks/<tool use id>/agent-<id>.jsonl` is a
  subagent stream spawned by that tool use (evidence native_structure);
- else `transcript.jsonl` (Entire Transcript Format v1) is mapped here (formats/entire_transcript.py);
- else the session is a `sessions` row of its metadata, with a loss naming why nothing was converted.
When per-call usage is absent, the metadata `token_usage` of each checkpoint is a usage summary.
Commits whose message carries `Entire-Checkpoint:` trailers become vcs_events rows.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import polars as pl
import pyarrow as pa
import pygit2

from batch.formats.entire_metadata import (
    checkpoint_commits_frame,
    checkpoint_sessions_frame,
    checkpoints_frame,
    source_losses_frame,
)
from batch.formats.entire_transcript import SOURCE_FORMAT, read_etf
from batch.formats.rows import dump_json, to_frame
from batch.schema.workspace import USAGE_SUMMARIES, VCS_EVENTS
from batch.schema.work import WORK_SCHEMAS
from batch.sources import codex as codex_files
from batch.sources.base import CLAUDE_CODE, Loaded, Stream, Unit
from batch.sources.entire import (
    Blob,
    CommitLink,
    FileEntry,
    Scan,
    SessionEntry,
    SessionUnit,
    SourceLoss,
    load_session,
    scan_checkpoints,
    scan_trailers,
    select_sessions,
)
from batch.sources.entire import held
from batch.sources.git import open_repository, repository_name

CODEX = codex_files.FORMAT
CHECKPOINT_META = "io.entire/checkpoint"
AGENT_FILE = re.compile(r"(?:^|/)agent-(.+)\.jsonl$")
# Entire's agent display names as ASR agent names; another name is lowercased with dashes.
AGENT_NAMES = {"Claude Code": "claude-code", "Codex": "codex", "Gemini CLI": "gemini-cli", "OpenCode": "opencode",
               "Cursor": "cursor", "Copilot CLI": "copilot-cli", "Factory AI Droid": "factory-droid", "Pi": "pi"}
# categories of source losses counted in the summary line
MISSING_OBJECTS = {"missing_blob", "missing_session_folder"}
CORRUPT_JSON = {"corrupt_metadata"}

EXPORT_REPORT = {
    "redaction_counts": (
        "Entire redacts transcripts before storing them (content_level redacted) but stores no redaction counts in "
        "any version: sessions.meta carries none."
    ),
    "checkpoint_selection": (
        "Every checkpoint stores the whole session so far. By default the newest checkpoint of each session is "
        "converted; with --all-checkpoints every checkpoint is read, records are keyed by their position and "
        "native ID in the newest transcript (a checkpoint's transcript is a prefix of it) and written once, and "
        "checkpoint_sessions.checkpoint_transcript_start tells which records each checkpoint covered. A checkpoint "
        "whose transcript is not such a prefix is a declared loss (entire.checkpoint_diverges)."
    ),
    "fallback": (
        "Sessions without a Claude Code full.jsonl are read from transcript.jsonl (Entire Transcript Format v1, "
        "producer_method import, producer_source entire-transcript) with its declared losses; without either, "
        "the session is a sessions row of its metadata and a loss names the reason."
    ),
    "commits": (
        "Each Entire-Checkpoint trailer of a code branch is a vcs_events row per (commit, session of the "
        "checkpoint): action commit, evidence reported (an association Entire reports, not an observed commit "
        "action), the checkpoint ID in native._meta."
    ),
}


@dataclass
class Import:
    """What discovery found in one repository: units of work, and the rows written once per run."""

    root: Path
    units: list[Unit] = field(default_factory=list)
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)  # checkpoint tables, vcs_events, losses
    summary: dict = field(default_factory=dict)
    # (repository, ref, checkpoint ID) -> the commit each checkpoint is read from (the reference's tip)
    tips: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # what the output holds of the repository (sources/entire/held.py): its name, Git folder, the
    # references the scan read (name, object ID) and the commits naming checkpoints
    repository: str = ""
    git_path: str = ""
    refs: tuple[tuple[str, str], ...] = ()
    trailers: tuple[str, ...] = ()


def discover(path: Path, *, combine: bool = False) -> Import:
    """Scan the checkpoints of the repository at `path` (metadata only) into units of work, one per session."""
    repo = open_repository(path)
    root = Path(repo.workdir or repo.path).resolve()
    name = repository_name(repo)
    scan = scan_checkpoints(repo)
    selected = select_sessions(scan, combine=combine)
    links = scan_trailers(repo)
    by_key: dict[str, list[SessionEntry]] = {}
    for entry in selected:
        by_key.setdefault(entry.session_key, []).append(entry)
    every: dict[str, list[SessionEntry]] = {}
    for checkpoint in scan.checkpoints:
        for session in checkpoint.sessions:
            every.setdefault(session.session_key, []).append(session)
    delta = {c.checkpoint_id: (c.metadata or {}).get("token_usage_version") == 2 for c in scan.checkpoints}
    units = [
        Unit(key, sum(e.size for e in entries),
             partial(_load, str(Path(repo.path)), name, entries, every[key], delta), label=f"{name}: session {key}",
             fingerprint=fingerprint(name, entries, every[key], delta, combine=combine))
        for key, entries in sorted(by_key.items())
    ]
    chosen = {(e.checkpoint_id, e.folder) for e in selected}
    found = [loss for c in scan.checkpoints for loss in c.losses]
    found += [loss for c in scan.checkpoints for s in c.sessions if (s.checkpoint_id, s.folder) not in chosen
              for loss in s.losses]
    found += scan.unattached
    losses = [(None, loss) for loss in found] + [(None, loss) for loss in _absent_checkpoints(links, scan)]
    frames = {
        "checkpoints": checkpoints_frame(scan),
        "checkpoint_sessions": checkpoint_sessions_frame(scan, selected),
        "checkpoint_commits": checkpoint_commits_frame(links, scan),
        "vcs_events": _commit_events(links, scan),
        "losses": source_losses_frame(losses),
    }
    summary = {
        "repository": name, "path": str(root), "checkpoints": len(scan.checkpoints),
        "sessions": len(by_key), "session_folders": sum(len(c.sessions) for c in scan.checkpoints),
        "commit_trailers": len(links), "all_checkpoints": combine,
        "skipped": [{"ref": ref, "reason": why} for ref, why in scan.skipped],
    }
    tips = {(c.location.repository, c.location.ref, c.checkpoint_id): c.location.commit_id for c in scan.checkpoints}
    return Import(root, units, frames, summary, tips, name, str(Path(repo.path)), tuple(held.storage_refs(repo)),
                  tuple(sorted({link.commit_id for link in links})))


# ---------------------------------------------------------------------------------------------
# Incremental re-runs: what a unit's rows depend on, known without reading a transcript


def fingerprint(
    name: str, entries: list[SessionEntry], every: list[SessionEntry], delta: dict[str, bool], *, combine: bool
) -> tuple:
    """What the rows `_load` gives for one session depend on, from the scan alone (no blob is read).

    Git objects are content-addressed, so a blob's ID stands for its bytes. Per session folder
    converted (`entries`): where it is read (reference, tree path), the losses the scan found in it
    and the `--all-checkpoints` choice; per blob its `load_session` reads (transcript and chunks,
    transcript.jsonl, metadata, prompt, context, content hash, other files, and each task's files):
    its name as shown in the outputs, tree path, blob ID and size (absent: a loss). So a hash
    mismatch, the agent, the converter chosen and the subagents are decided by what is fingerprinted.
    Per session folder of the session in any checkpoint (`every`, for the selection and the
    usage summaries of the metadata): its metadata blob ID and whether its checkpoint counts
    token usage as deltas. The tip commit of the reference is left out: no row holds it, only the
    manifest inputs' provenance, which `current_provenance` brings up to date, so that a new commit on
    entire/checkpoints/v1 converts only the sessions it changed.
    Each entry is five strings, the first a name as `Stream.name` shows it (what carving an old
    batch by group keys on, batch/incremental/carving.py `carve`)."""
    found: set[tuple[str, str, str, str, str]] = set()
    for entry in entries:
        loc, cid = entry.location, entry.checkpoint_id
        losses = [[loss.category, loss.detail, loss.path] for loss in entry.losses]
        found.add((f"{name}/{cid}/{entry.folder}", "session", loc.ref, entry.path,
                   dump_json({"all_checkpoints": combine, "losses": losses})))
        files = [*entry.files.values(), *entry.chunks, *entry.unknown]
        for task in entry.tasks:
            files += [f for f in (task.task_json, *task.other) if f is not None]
            # a subagent stream is shown as <repository>/<checkpoint>/tasks/<tool use id>/agent-<id>.jsonl
            found.update((f"{name}/{cid}/tasks/{f.path.rsplit('tasks/', 1)[-1]}", "task", f.path, f.blob_id,
                          _size(f)) for f in task.transcripts)
        found.update((_shown(name, entry, f), "file", f.path, f.blob_id, _size(f)) for f in files)
    for entry in every:
        meta = entry.files.get("metadata")
        found.add((f"{name}/{entry.checkpoint_id}/{entry.folder}", "metadata", entry.location.ref,
                   meta.blob_id if meta else "", "token_usage_version 2" if delta.get(entry.checkpoint_id) else ""))
    return tuple(sorted(found))


def _shown(name: str, entry: SessionEntry, file: FileEntry) -> str:
    """A blob's name as the outputs show it: <repository>/<checkpoint>/<path in the checkpoint>, the
    transcript always as <folder>/full.jsonl (the main stream's name; a v2 raw transcript is stored as
    raw_transcript on a /full ref)."""
    if file is entry.files.get("transcript"):
        return f"{name}/{entry.checkpoint_id}/{entry.folder}/full.jsonl"
    base = (file.location or entry.location).base
    return f"{name}/{entry.checkpoint_id}/{file.path[len(base) + 1:] if base else file.path}"


def _size(file: FileEntry) -> str:
    return "absent" if file.size is None else str(file.size)


def current_provenance(inputs: list[dict], imports: list[Import]) -> list[dict]:
    """Manifest inputs a previous run recorded, with the commit each Git blob is read from now.

    A unit's fingerprint leaves out the tip commit of the reference its blobs are read from (a new
    checkpoint on entire/checkpoints/v1 moves it for every checkpoint of the branch, whose blobs and
    rows stay the same); only the provenance of the manifest's inputs shows it."""
    tips = {key: commit for imp in imports for key, commit in imp.tips.items()}
    if not tips:
        return inputs
    def now(p: dict) -> dict:
        return {**p, "commit_id": tips.get((p.get("repository"), p.get("ref"), p.get("checkpoint_id")), p["commit_id"])}

    return [{**i, "provenance": [now(p) for p in i["provenance"]]} if i.get("provenance") else i for i in inputs]


def run_key(imports: list[Import]) -> str | None:
    """A digest of what the imports give once per run (checkpoint tables, trailers, scan losses, the
    manifest's summary of each repository); None without imports. The final stage of a run whose
    batches are all reused is reused too when this is unchanged."""
    if not imports:
        return None
    digest = hashlib.sha256()
    for imp in imports:
        digest.update(json.dumps(imp.summary, sort_keys=True).encode() + b"\0")
        for table in sorted(imp.frames):
            digest.update(table.encode() + b"\0" + imp.frames[table].write_ndjson().encode() + b"\0")
    return digest.hexdigest()


def _absent_checkpoints(links: list[CommitLink], scan: Scan) -> list[SourceLoss]:
    present = {c.checkpoint_id for c in scan.checkpoints}
    return [
        SourceLoss("absent_checkpoint", f"commit {link.commit_id} names checkpoint {link.checkpoint_id} in an "
                   "Entire-Checkpoint trailer; the repository does not hold it (not fetched, or deleted)",
                   link.checkpoint_id, None, None)
        for link in links if link.checkpoint_id not in present
    ]


def _commit_events(links: list[CommitLink], scan: Scan) -> pl.DataFrame:
    """A vcs_events row per (commit, session of the checkpoint its trailer names); one with no session when absent."""
    sessions = {c.checkpoint_id: sorted({s.session_key for s in c.sessions}) for c in scan.checkpoints}
    rows = []
    for link in links:
        native = dump_json({"commit_id": link.commit_id, "trailer": f"Entire-Checkpoint: {link.checkpoint_id}",
                            "trailer_index": link.index, "_meta": {CHECKPOINT_META: link.checkpoint_id}})
        for key in sessions.get(link.checkpoint_id) or [None]:
            rows.append({"session_key": key, "action": "commit", "evidence": "reported",
                         "native_field": "Entire-Checkpoint", "commit_id": link.commit_id,
                         "observation_count": 1, "native": native})
    return to_frame(rows, VCS_EVENTS)


# ---------------------------------------------------------------------------------------------
# Loading one session (in a batch)

_repos = threading.local()


def _repository(path: str) -> pygit2.Repository:
    # one libgit2 handle per thread: batches run on several threads
    cache = getattr(_repos, "cache", None)
    if cache is None:
        cache = _repos.cache = {}
    if path not in cache:
        cache[path] = pygit2.Repository(path)
    return cache[path]


def _load(
    path: str, name: str, entries: list[SessionEntry], every: list[SessionEntry], delta: dict[str, bool]
) -> Loaded:
    repo = _repository(path)
    sessions = [load_session(repo, e) for e in entries]  # oldest first; the last one is the newest
    newest = sessions[-1]
    key = newest.session_key
    loaded = Loaded()
    losses = [loss for s in sessions for loss in s.losses]
    meta = {CHECKPOINT_META: newest.checkpoint_id}
    per_call_usage = False
    if newest.native_format == CLAUDE_CODE and newest.transcript is not None:
        loaded.streams.append(_stream(name, newest, newest.transcript, "full.jsonl", "main", key, key, meta=meta))
        losses += _divergent(sessions)
        _add_tasks(loaded, name, sessions, key)
        per_call_usage = True
    elif newest.native_format == CODEX and newest.transcript is not None:
        loaded.streams.append(_stream(name, newest, newest.transcript, "full.jsonl", "main", key, key, meta=meta,
                                      producer=CODEX))
        per_call_usage = True
    elif newest.compact_transcript is not None:
        per_call_usage = _add_etf(loaded, name, newest, meta)
    else:
        loaded.add("session_streams", _work_frame([_session_row(newest, meta, None)], "session_streams"))
        if not any(loss.session == newest.entry.folder for loss in newest.losses):
            losses.append(SourceLoss("no_transcript", "no transcript of this session could be converted",
                                     newest.checkpoint_id, newest.entry.folder, newest.entry.path))
    if not per_call_usage:
        loaded.add("usage_summaries", _usage_summaries(key, every, newest, delta))
    loaded.add("source_losses", source_losses_frame([(key, loss) for loss in losses]))
    return loaded


def _stream(
    name: str, unit: SessionUnit, blob: Blob, filename: str, kind: str, key: str, session_id: str, *,
    meta: dict, parent: str | None = None, agent_id: str | None = None, producer: str = CLAUDE_CODE,
) -> Stream:
    # shown as <repository>/<checkpoint>/<folder>/full.jsonl, or <repository>/<checkpoint>/tasks/<tool use id>/...
    shown = f"{name}/{unit.checkpoint_id}/{unit.entry.folder}/{filename}"
    if kind != "main":
        shown = f"{name}/{unit.checkpoint_id}/tasks/{blob.provenance[0].path.rsplit('tasks/', 1)[-1]}"
    return Stream(
        shown, len(blob.data), kind, session_id, key, parent, agent_id, None,
        content_level="redacted", producer_source=producer, data=blob.data,
        provenance=tuple({"repository": p.repository, "ref": p.ref, "commit_id": p.commit_id,
                          "checkpoint_id": p.checkpoint_id, "tree_path": p.path, "blob_id": p.blob_id}
                         for p in blob.provenance),
        meta=dump_json(meta),
    )


def _divergent(sessions: list[SessionUnit]) -> list[SourceLoss]:
    """Older checkpoints whose transcript is not a prefix of the newest one: their other lines are not converted."""
    newest = sessions[-1].transcript.data
    out = []
    for older in sessions[:-1]:
        if older.transcript is None or older.native_format != CLAUDE_CODE:
            continue
        data = older.transcript.data.rstrip(b"\n")
        if not newest.startswith(data):
            out.append(SourceLoss(
                "checkpoint_diverges", f"its full.jsonl is not a prefix of the newest checkpoint's "
                f"({sessions[-1].checkpoint_id}): records only it holds are not converted",
                older.checkpoint_id, older.entry.folder, older.entry.path,
            ))
    return out


def _add_tasks(loaded: Loaded, name: str, sessions: list[SessionUnit], key: str) -> None:
    """Subagent transcripts under tasks/<tool use id>/ as streams; the newest checkpoint's copy of each."""
    tasks = {}
    for unit in sessions:
        for task in unit.tasks:
            for blob in task.transcripts:
                match = AGENT_FILE.search(blob.provenance[0].path)
                if match:
                    tasks[match.group(1)] = (unit, task, blob)
    evidence = []
    for agent_id, (unit, task, blob) in sorted(tasks.items()):
        child = f"{key}/{agent_id}"
        meta = {CHECKPOINT_META: unit.checkpoint_id, "io.entire/tool_use_id": task.tool_use_id}
        loaded.streams.append(_stream(name, unit, blob, "", "subagent", child, agent_id, meta=meta,
                                      parent=key, agent_id=agent_id))
        role = (task.task or {}).get("subagent_type")
        evidence.append({"child_session_key": child, "relation": "spawned_by", "parent_session_key": key,
                         "call_id": task.tool_use_id, "role": role if isinstance(role, str) else None,
                         "source": "entire.tasks"})
    if evidence:
        loaded.add("lineage_evidence", _work_frame(evidence, "lineage_evidence"))


def _add_etf(loaded: Loaded, name: str, unit: SessionUnit, meta: dict) -> bool:
    """Map transcript.jsonl (ETF v1); return whether it carries per-call usage."""
    blob = unit.compact_transcript
    key = unit.session_key
    shown = f"{name}/{unit.checkpoint_id}/{unit.entry.folder}/transcript.jsonl"
    etf = read_etf(blob.data, session_key=key, source_file=shown,
                   compact_transcript_start=unit.entry.compact_transcript_start)
    for table, frame in (("records", etf.records), ("parts", etf.parts), ("tool_calls", etf.tool_calls),
                         ("source_lines", etf.source_lines), ("rejects", etf.rejects), ("source_losses", etf.losses)):
        loaded.add(table, frame)
    loaded.add("inference_candidates", etf.observations.with_columns(stream_ord=pl.col("usage_source_line")))
    first = next((line for line in blob.data.split(b"\n") if line.strip()), b"")
    try:
        agent = json.loads(first).get("agent")
    except (ValueError, AttributeError):
        agent = None
    records = etf.records
    row = _session_row(unit, meta, agent if isinstance(agent, str) else None)
    row.update(
        producer_method="import", producer_source=SOURCE_FORMAT, content_level="redacted",
        started_at=records.get_column("timestamp").min(), ended_at=records.get_column("timestamp").max(),
        record_count=records.height, line_count=etf.source_lines.height, source_files=[shown],
    )
    loaded.add("session_streams", _work_frame([row], "session_streams"))
    loaded.inputs.append({
        "path": shown, "size": len(blob.data), "sha256": hashlib.sha256(blob.data).hexdigest(),
        "session_key": key, "stream_kind": "main", "lines": etf.source_lines.height, "versions": [],
        "blank_lines": sum(1 for line in blob.data.split(b"\n")[:-1] if not line.strip()),
        "status": "converted" if records.height else "empty", "format": SOURCE_FORMAT,
        "provenance": [asdict(p) for p in blob.provenance],
    })
    return not etf.losses.filter(pl.col("category") == "per_call_usage").height and bool(etf.observations.height)


def _session_row(unit: SessionUnit, meta: dict, agent: str | None) -> dict:
    entry = unit.entry
    return {
        "session_key": entry.session_key, "session_id": entry.session_id or entry.session_key, "stream_kind": "main",
        # the agent metadata.json names, else the ETF lines' registry name
        "agent": (AGENT_NAMES.get(entry.agent) or entry.agent.lower().replace(" ", "-")) if entry.agent else agent,
        "record_count": 0, "line_count": 0, "source_files": [], "meta": dump_json(meta),
    }


def _work_frame(rows: list[dict], name: str) -> pl.DataFrame:
    """Rows of a work table with exactly its columns and types; keys a row lacks are null."""
    schema = WORK_SCHEMAS[name]
    return pl.from_arrow(pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in schema.names}, schema=schema))


def _usage_summaries(key: str, every: list[SessionEntry], newest: SessionUnit, delta: dict[str, bool]) -> pl.DataFrame:
    """metadata.json token_usage of each checkpoint of the session, when the transcript gives no per-call usage."""
    rows = []
    for entry in sorted(every, key=lambda e: (e.created_at is not None, e.created_at or 0, e.checkpoint_id)):
        usage = (entry.metadata or {}).get("token_usage")
        if not isinstance(usage, dict):
            continue
        model = (entry.metadata or {}).get("model")
        rows.append({
            "session_key": key, "scope": "checkpoint",
            # token_usage_version 2: each checkpoint's counts are a delta; older data may be cumulative
            "is_cumulative": False if delta.get(entry.checkpoint_id) else None,
            "is_latest": entry.checkpoint_id == newest.checkpoint_id and entry.folder == newest.entry.folder,
            "input_uncached_tokens": _int(usage, "input_tokens"), "output_total_tokens": _int(usage, "output_tokens"),
            "cache_read_tokens": _int(usage, "cache_read_tokens"),
            "cache_write_tokens": _int(usage, "cache_creation_tokens"),
            "thinking_tokens": _int(usage, "thinking_tokens"),
            "models": [model] if isinstance(model, str) and model else [],
            "native": dump_json({"token_usage": usage, "_meta": {CHECKPOINT_META: entry.checkpoint_id}}),
        })
    return to_frame(rows, USAGE_SUMMARIES)


def _int(m: dict, key: str) -> int | None:
    value = m.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
