"""Entire checkpoint metadata (root and session metadata.json, trailers, source losses) as frames.

Metadata fields vary across Entire versions (reference §1.5, §1.6): every field is read
permissively (a value of the wrong JSON type is null) and the whole file is kept as JSON.
"""

from __future__ import annotations

import polars as pl

from batch.formats.rows import dump_json as _dump
from batch.formats.rows import to_frame as _frame
from batch.schema.core import LOSSES
from batch.schema.entire import CHECKPOINT_COMMITS, CHECKPOINT_SESSIONS, CHECKPOINTS
from batch.sources.entire import CommitLink, Scan, SessionEntry, SourceLoss


def checkpoints_frame(scan: Scan) -> pl.DataFrame:
    """One row per checkpoint of a scan (table `checkpoints`)."""
    rows = []
    for c in scan.checkpoints:
        m = c.metadata or {}
        # layout v1+v2: the aggregates of the union (scan_v2.reaggregate); v1's stored ones stay in `metadata`
        a = m if c.recomputed is None else c.recomputed
        rows.append({
            "checkpoint_id": c.checkpoint_id, "repository": c.location.repository, "ref": c.location.ref,
            "commit_id": c.location.commit_id, "tree_path": c.location.base, "shadowed_refs": c.shadowed,
            "layout": c.layout,
            "cli_version": _str(m, "cli_version"), "strategy": _str(m, "strategy"), "branch": _str(m, "branch"),
            "commit_sha": _str(m, "commit_sha"), "checkpoints_count": _int(a, "checkpoints_count"),
            "files_touched": _strs(a, "files_touched"), "session_count": len(c.sessions),
            "token_usage_version": _int(m, "token_usage_version"), "token_usage": _json(a, "token_usage"),
            "combined_attribution": _json(a, "combined_attribution"),
            "metadata": _dump(c.metadata),
        })
    return _frame(rows, CHECKPOINTS)


def checkpoint_sessions_frame(scan: Scan, selected: list[SessionEntry]) -> pl.DataFrame:
    """One row per session folder of every checkpoint (table `checkpoint_sessions`); `selected` are the
    folders chosen for conversion (select_sessions)."""
    chosen = {(s.checkpoint_id, s.folder) for s in selected}
    rows = []
    for c in scan.checkpoints:
        for s in c.sessions:
            m = s.metadata or {}
            usage = m.get("token_usage") if isinstance(m.get("token_usage"), dict) else {}
            attribution = m.get("initial_attribution") if isinstance(m.get("initial_attribution"), dict) else {}
            summary = m.get("summary") if isinstance(m.get("summary"), dict) else {}
            transcript = s.files.get("transcript")
            compact = s.files.get("compact_transcript")
            rows.append({
                "checkpoint_id": s.checkpoint_id, "session_folder": s.folder, "session_key": s.session_key,
                "session_id": s.session_id, "is_selected": (s.checkpoint_id, s.folder) in chosen, "layout": s.layout,
                "agent": s.agent, "model": _str(m, "model"), "created_at": s.created_at,
                "turn_id": _str(m, "turn_id"), "cli_version": _str(m, "cli_version"), "strategy": _str(m, "strategy"),
                "branch": _str(m, "branch"), "kind": _str(m, "kind"),
                "checkpoint_transcript_start": s.transcript_start,
                "compact_transcript_start": s.compact_transcript_start,
                "token_transcript_start": _int(m, "token_transcript_start"),
                "transcript_identifier_at_start": _str(m, "transcript_identifier_at_start")
                or _str(m, "transcript_uuid_at_start"),
                "input_tokens": _int(usage, "input_tokens"), "cache_creation_tokens": _int(usage, "cache_creation_tokens"),
                "cache_read_tokens": _int(usage, "cache_read_tokens"), "output_tokens": _int(usage, "output_tokens"),
                "thinking_tokens": _int(usage, "thinking_tokens"), "api_call_count": _int(usage, "api_call_count"),
                "token_usage": _json(m, "token_usage"),
                "agent_lines": _int(attribution, "agent_lines"), "human_added": _int(attribution, "human_added"),
                "human_modified": _int(attribution, "human_modified"),
                "human_removed": _int(attribution, "human_removed"),
                "total_committed": _int(attribution, "total_committed"),
                "agent_percentage": _float(attribution, "agent_percentage"),
                "attribution_metric_version": _int(attribution, "metric_version"),
                "attribution": _json(m, "initial_attribution"),
                "summary_intent": _str(summary, "intent"), "summary_outcome": _str(summary, "outcome"),
                "summary": _json(m, "summary"), "files_touched": _strs(m, "files_touched"),
                "transcript_path": transcript.path if transcript else None, "transcript_chunks": len(s.chunks),
                "compact_transcript_path": compact.path if compact else None, "task_count": len(s.tasks),
                "metadata": _dump(s.metadata),
            })
    return _frame(rows, CHECKPOINT_SESSIONS)


def checkpoint_commits_frame(links: list[CommitLink], scan: Scan) -> pl.DataFrame:
    """One row per (commit, checkpoint) trailer (table `checkpoint_commits`)."""
    present = {c.checkpoint_id for c in scan.checkpoints}
    rows = [{"commit_id": link.commit_id, "checkpoint_id": link.checkpoint_id, "trailer_index": link.index,
             "is_checkpoint_present": link.checkpoint_id in present} for link in links]
    return _frame(rows, CHECKPOINT_COMMITS)


def source_losses_frame(losses: list[tuple[str | None, SourceLoss]]) -> pl.DataFrame:
    """Source losses as rows of the `losses` table: (session key or None, loss) pairs; the detail names the
    checkpoint, the session folder and the tree path."""
    rows = []
    for session_key, loss in losses:
        where = f"checkpoint {loss.checkpoint_id}"
        if loss.session is not None:
            where += f", session folder {loss.session}"
        if loss.path is not None:
            where += f", {loss.path}"
        rows.append({"session_key": session_key, "category": f"entire.{loss.category}",
                     "detail": f"{where}: {loss.detail}", "count": 1})
    return _frame(rows, LOSSES)


def _str(m: dict, key: str) -> str | None:
    value = m.get(key)
    return value if isinstance(value, str) and value else None


def _int(m: dict, key: str) -> int | None:
    value = m.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(m: dict, key: str) -> float | None:
    value = m.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _strs(m: dict, key: str) -> list[str] | None:
    value = m.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _json(m: dict, key: str) -> str | None:
    return _dump(m.get(key))
