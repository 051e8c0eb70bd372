"""What an output's Parquet files were when they were written, and which of them are damaged now.

Every run records each Parquet file of the output it writes, by its path in the output, with its
size and SHA-256 (the manifest's `files`). A later run finds the files of the previous output that
are damaged: missing, or of another size (truncated, partly copied), and with `--verify` also of
another SHA-256. The pipeline then converts the session groups whose rows those files hold again,
from their files, or from the output's own copy of them (batch/sources/archive.py); only what no
intact copy holds is a declared loss (docs/asr-tables.md, "Checking and repairing an output").
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from batch.output.layout import PART_RE, WORK


def part_paths(part: str, tables: list[str], work_tables: list[str]) -> set[str]:
    """The paths in an output of the parts named `part` of `tables` and of the work tables `work_tables`."""
    return {f"{t}/part-{part}.parquet" for t in tables} | {f"{WORK}/{t}/part-{part}.parquet" for t in work_tables}


def seal(folder: Path, previous: Path, known: dict[str, list]) -> dict[str, list]:
    """Each part file of the output folder `folder` by its path there: [size, SHA-256]. A file that is
    the previous output's file of the same path (`previous`: a part hard-linked from it, found intact)
    keeps the digest `known` records for it; the others are read."""
    files = {}
    for path in sorted([*folder.glob("*/part-*.parquet"), *folder.glob(f"{WORK}/*/part-*.parquet")]):
        if not PART_RE.match(path.name) or path.is_symlink():
            continue
        rel = path.relative_to(folder).as_posix()
        stat, recorded = path.stat(), known.get(rel)
        files[rel] = recorded if _is_entry(recorded) and _same(stat, previous / rel) else [stat.st_size, _sha256(path)]
    return files


def _same(stat: os.stat_result, other: Path) -> bool:
    """Whether `other` is the file `stat` describes (a hard link of it)."""
    try:
        theirs = other.stat()
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (stat.st_dev, stat.st_ino)


def damaged(out: Path, recorded: dict[str, list], *, verify: bool) -> set[str]:
    """The files `recorded` (an earlier run's `seal`) that the output `out` no longer holds as they
    were: missing, of another size, or (`verify`) of another SHA-256."""
    found = set()
    for rel, entry in recorded.items():
        if not _is_entry(entry):
            continue
        path = out / rel
        try:
            size = path.stat().st_size if not path.is_symlink() else -1
        except OSError:
            size = -1
        if size != entry[0] or (verify and _sha256(path) != entry[1]):
            found.add(rel)
    return found


def _is_entry(entry: object) -> bool:
    return isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int) and isinstance(entry[1], str)


def _sha256(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None
