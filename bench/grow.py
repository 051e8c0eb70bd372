"""Sessions grown as Claude Code grows a live transcript: a user line appended (bench/run.py's
re-runs, bench/driver.py --grown). Imports nothing heavy: bench/driver.py measures its own RSS."""

from __future__ import annotations

import json
from pathlib import Path


def main_transcripts(archive: Path) -> list[Path]:
    return sorted(p for p in archive.rglob("*.jsonl") if "subagents" not in p.parts)


def grow_sessions(archive: Path, share: float, chosen: list[Path] | None = None) -> int:
    """Append one user line to `share` of the main transcripts (every 1/share-th by name, or `chosen`);
    return how many.

    A file is first replaced by a copy of itself, so a hard-linked original is never changed."""
    if chosen is None:
        chosen = main_transcripts(archive)[:: max(1, round(1 / share))]
    for n, path in enumerate(chosen):
        data = path.read_bytes()
        path.unlink()
        line = {
            "type": "user", "uuid": f"00000000-0000-4000-8000-{n:012d}", "parentUuid": None,
            "sessionId": path.stem, "timestamp": "2026-03-01T00:00:00.000Z", "isSidechain": False,
            "message": {"role": "user", "content": "one more prompt"},
        }
        path.write_bytes(data + (b"" if data.endswith(b"\n") or not data else b"\n") + json.dumps(line).encode() + b"\n")
    return len(chosen)
