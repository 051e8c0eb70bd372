"""Entire checkpoints stored in Git: enumerate checkpoints and sessions, load a session's bytes.

Storage (see docs/architecture.md, "Entire checkpoints"), one module per layout:
- the branch `entire/checkpoints/v1` (and its remote-tracking copies): one checkpoint per subtree
  `<id[:2]>/<id[2:]>/`, read at the branch tip (scan_v1.py);
- one ref per checkpoint `refs/entire/checkpoints/<shard>/<id>` (shard = the id's last two
  characters): the tip commit's root tree is the checkpoint (scan_refs.py).
A checkpoint holds a summary `metadata.json`, one folder per session (`0/`, `1/`, ... not always
contiguous) and `tasks/<tool use id>/` subagent records, read alike whichever layout holds it
(checkpoint.py). Every checkpoint stores the whole session so far, so one session appears in
several checkpoints.

Reading is in steps so that memory stays bounded: `scan_checkpoints` (scan.py) asks each layout
for its checkpoints, routes an ID found in several places to one of them, and reads only the small
metadata blobs, listing every other blob with its id and size; `select_sessions` (selection.py)
chooses the session folders to convert; `load_session` (load.py) then reads the blobs of one
session. `scan_trailers` (trailers.py) finds the commits naming checkpoints. Nothing unreadable stops
the scan: absent blobs, corrupt JSON and hash mismatches become `SourceLoss` entries naming the
checkpoint, the session and the path. The types are in model.py.
"""

from batch.sources.entire.load import iter_units, load_session, native_format_of
from batch.sources.entire.model import (
    Blob,
    Checkpoint,
    CheckpointLocation,
    FileEntry,
    Provenance,
    Scan,
    SessionEntry,
    SessionUnit,
    SourceLoss,
    TaskEntry,
    TaskUnit,
    is_checkpoint_id,
    parse_time,
)
from batch.sources.entire.scan import scan_checkpoints
from batch.sources.entire.selection import select_sessions
from batch.sources.entire.trailers import CommitLink, scan_trailers

__all__ = [
    "Blob",
    "Checkpoint",
    "CheckpointLocation",
    "CommitLink",
    "FileEntry",
    "Provenance",
    "Scan",
    "SessionEntry",
    "SessionUnit",
    "SourceLoss",
    "TaskEntry",
    "TaskUnit",
    "is_checkpoint_id",
    "iter_units",
    "load_session",
    "native_format_of",
    "parse_time",
    "scan_checkpoints",
    "scan_trailers",
    "select_sessions",
]
