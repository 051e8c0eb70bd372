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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from batch.output import manifest as manifest_file
from batch.output.layout import MANIFEST, PART_RE, WORK


@dataclass(frozen=True)
class Recorded:
    """The part files the manifest of the output `out` records (`files`), [size, SHA-256] each by its
    path there, read from the file an entry at a time when iterated (they grow with the archive: about
    9 KiB a batch), but those of `damaged`; none when it records none or cannot be read."""

    out: Path
    damaged: frozenset[str] = frozenset()

    def __iter__(self) -> Iterator[tuple[str, list]]:
        try:
            for rel, entry in manifest_file.items(self.out / MANIFEST, "files"):
                if _is_entry(entry) and rel not in self.damaged:
                    yield rel, entry
        except (OSError, ValueError):  # a manifest edited or damaged since it was found ours: what was read
            return


def part_paths(part: str, tables: list[str], work_tables: list[str]) -> set[str]:
    """The paths in an output of the parts named `part` of `tables` and of the work tables `work_tables`."""
    return {f"{t}/part-{part}.parquet" for t in tables} | {f"{WORK}/{t}/part-{part}.parquet" for t in work_tables}


def seal(folder: Path, previous: Path, known: Iterable[tuple[str, list]]) -> Iterator[tuple[str, list]]:
    """Each part file of the output folder `folder` by its path there, in the order of the paths' parts:
    [size, SHA-256]. A file that is the previous output's file of the same path (`previous`: a part
    hard-linked from it, found intact) keeps the digest `known` records for it (read alongside: in the
    same order, as a run records them; one out of order is read again); the others are read."""
    recorded = iter(known)
    held = next(recorded, None)
    for rel, entry in _part_files(folder):
        while held is not None and held[0].split("/") < rel.split("/"):
            held = next(recorded, None)
        stat = entry.stat()
        if held is not None and held[0] == rel and _is_entry(held[1]) and _same(stat, previous / rel):
            yield rel, held[1]
        else:
            yield rel, [stat.st_size, _sha256(Path(entry.path))]


def _part_files(folder: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """The part files of the output folder `folder` and of its work tables, by their path there, in
    the order of the paths' parts (as `sorted` orders paths), a folder's names at a time."""
    for table in _sorted_entries(folder):
        if not table.is_dir():
            continue
        for entry in _sorted_entries(table.path):
            if table.name == WORK and entry.is_dir():
                for part in _sorted_entries(entry.path):
                    if _is_part(part):
                        yield f"{WORK}/{entry.name}/{part.name}", part
            elif _is_part(entry):
                yield f"{table.name}/{entry.name}", entry


def _sorted_entries(folder: str | Path) -> list[os.DirEntry]:
    with os.scandir(folder) as entries:
        return sorted(entries, key=lambda e: e.name)


def _is_part(entry: os.DirEntry) -> bool:
    return bool(PART_RE.match(entry.name)) and not entry.is_symlink()


def _same(stat: os.stat_result, other: Path) -> bool:
    """Whether `other` is the file `stat` describes (a hard link of it)."""
    try:
        theirs = other.stat()
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (stat.st_dev, stat.st_ino)


def damaged(out: Path, recorded: Iterable[tuple[str, list]], *, verify: bool) -> set[str]:
    """The files `recorded` (an earlier run's `seal`) that the output `out` no longer holds as they
    were: missing, of another size, or (`verify`) of another SHA-256."""
    found = set()
    for rel, entry in recorded:
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
