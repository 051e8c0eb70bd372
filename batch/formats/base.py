"""What a format's converter returns for the streams of one batch."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class Relation:
    """A table a converter left in DuckDB (formats/claude_code/converter.py): the name of a relation on
    the batch's connection, written from there (run/task.py `BatchParts.add_relation`)."""

    name: str


@dataclass
class Converted:
    """What a format made of a batch's streams."""

    # output tables and work tables (batch/schema/work.py), by name: a frame, or a relation in DuckDB
    tables: dict[str, pl.DataFrame | Relation]
    inputs: list[dict] = field(default_factory=list)  # manifest inputs, one per stream read
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why) of streams that could not be read
