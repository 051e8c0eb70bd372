"""Kept session groups whose part files are damaged or gone: rebuilt from the output's own copy of
their files where that copy is intact, else declared lost (docs/asr-tables.md, "Checking and
repairing an output").

A group whose files are there is converted again from them like any changed group (batch/pipeline.py);
this module is for the groups the output keeps whose sources are gone. Their copy is the parts of
`COPY_TABLES` of the batches holding them (batch/sources/archive.py reads nothing else of a group);
a copy part damaged or missing leaves nothing to rebuild the group from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from batch.errors import OutputError
from batch.incremental.state import Batch
from batch.output import integrity
from batch.sources import archive, registry

COPY_TABLES = ("source_lines", "records", "rejects", "sessions")
LOSS = "archive.part_damaged"


@dataclass
class Repair:
    """What a run does about the previous output's damaged part files."""

    recorded: integrity.Recorded | None = None  # the previous output's part files: size, SHA-256
    damaged: set[str] = field(default_factory=set)  # part files (paths in the output) damaged or gone
    held: set[str] = field(default_factory=set)  # the groups of the batches holding them
    rebuilt: set[str] = field(default_factory=set)  # kept groups rebuilt from the output's copy
    lost: set[str] = field(default_factory=set)  # kept groups that no intact copy holds

    def intact(self) -> integrity.Recorded | tuple:
        """The previous output's part files as recorded, but those damaged."""
        return () if self.recorded is None else replace(self.recorded, damaged=frozenset(self.damaged))

    def manifest(self) -> dict:
        """The manifest's `damaged`: the files, and what became of the groups they held."""
        return {
            "files": sorted(self.damaged),
            "session_groups_converted": len(self.held - self.rebuilt - self.lost),
            "session_groups_rebuilt": sorted(self.rebuilt),
            "session_groups_lost": sorted(self.lost),
        }

    def losses(self) -> pl.DataFrame:
        """A `_work/source_losses` row per group lost."""
        owners = sorted(self.lost)
        return pl.DataFrame(
            {
                "session_key": owners,
                "category": [LOSS] * len(owners),
                "detail": [
                    "its source is gone and the output's part files holding its rows and its copy of its files are "
                    "damaged or missing (manifest.json `damaged`)"
                ] * len(owners),
                "count": [1] * len(owners),
            },
            schema={"session_key": pl.String, "category": pl.String, "detail": pl.String, "count": pl.Int64},
        )


def rescue(out: Path, batches: tuple[Batch, ...], owners: set[str], repair: Repair, *, verify: bool) -> archive.Archive | None:
    """The output's copy of the kept groups `owners`, whose rows are in damaged or missing part files
    (`batches`: the previous state's), as an archive of units; the groups without an intact copy go
    to `repair.lost`. Without `verify`, a run that would lose a group is refused instead."""
    lost = set()
    for b in batches:
        held = owners & b.groups.keys()
        if not held:
            continue
        copy = integrity.part_paths(b.part, [t for t in COPY_TABLES if t in b.counts], [])
        if any(p in repair.damaged or not (out / p).is_file() for p in copy):
            lost |= held
    found = archive.discover(out, owners=owners - lost, damaged=repair.damaged) if owners - lost else None
    if found is not None:  # Entire sessions, from the output's copy of their repository
        registry.carry_repositories(found, set())
    rebuilt = {u.owner for u in found.units} if found else set()
    if owners - rebuilt and not verify:
        raise OutputError(
            f"{out}: the part files holding {len(owners - rebuilt)} sessions whose sources are gone (such as "
            f"{min(owners - rebuilt)}), and the output's copy of their files, are damaged or missing, so those sessions "
            "cannot be kept. Restore the output's files, or convert again with --verify to drop them as declared "
            "losses (or --prune to drop every session whose sources are gone)."
        )
    repair.lost |= owners - rebuilt
    repair.rebuilt |= rebuilt
    return found
