"""The selection: which session folders of a scan are converted.

Every checkpoint stores the whole session so far, so one session appears in several checkpoints;
by default the newest is converted, with `combine` every one of them (oldest first).
"""

from __future__ import annotations

from batch.sources.entire.model import Scan, SessionEntry


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
