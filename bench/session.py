"""Build one large session (subagents included) from a generated archive.

    python bench/session.py --archive bench/archive/2048 --size-mb 1024 --out bench/archive/session-1024

Takes the archive's transcripts in path order, main files with their subagent files, until SIZE is
reached, and writes them as one session: every sessionId a copied file names becomes one session ID,
so the main files are concatenated into `<project>/<id>.jsonl` and the subagents go to
`<project>/<id>/subagents/`. The generator gave every copy its own UUIDs, so the records stay distinct.
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

SESSION_ID = "5e551011-0000-4000-8000-000000000001"
PROJECT = "-bench-large-session"
SID = re.compile(rb'"sessionId":"([0-9a-f-]{36})"')
UUID_NAME = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _retarget(data: bytes) -> bytes:
    """Replace each sessionId the file names by SESSION_ID (same length, so line sizes stay)."""
    for sid in {m.group(1) for m in SID.finditer(data)}:
        data = data.replace(sid, SESSION_ID.encode())
    return data


def build(archive: Path, size_mb: float, out: Path) -> dict:
    """Write one session of at least size_mb MiB into out; return its summary."""
    if out.exists():
        shutil.rmtree(out)
    target = int(size_mb * (1 << 20))
    main = out / PROJECT / f"{SESSION_ID}.jsonl"
    subagents = out / PROJECT / SESSION_ID / "subagents"
    subagents.mkdir(parents=True)
    size = mains = agents = 0
    with main.open("wb") as fh:
        for path in sorted(archive.glob("*/*.jsonl")):
            if size >= target:
                break
            if UUID_NAME.match(path.stem):
                data = _retarget(path.read_bytes())
                if data and not data.endswith(b"\n"):
                    data += b"\n"  # a truncated last line stays a bad line, not a join with the next file
                fh.write(data)
                size += len(data)
                mains += 1
                group = [*sorted((path.parent / path.stem / "subagents").glob("agent-*"))]
            elif path.stem.startswith("agent-"):  # an older layout: subagent files beside the main files
                group = [path]
            else:
                continue
            for sub in group:
                if sub.suffix == ".jsonl":
                    data = _retarget(sub.read_bytes())
                    size += len(data)
                    agents += 1
                else:
                    data = sub.read_bytes()  # .meta.json sidecar
                (subagents / sub.name).write_bytes(data)
    return {"path": str(out), "mib": size / (1 << 20), "main_files": mains, "subagent_files": agents,
            "session_id": SESSION_ID}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--archive", type=Path, required=True)
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    print(build(args.archive, args.size_mb, args.out))


if __name__ == "__main__":
    main()
