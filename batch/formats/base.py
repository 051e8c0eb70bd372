"""What a format's converter returns for the streams of one batch."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass
class Converted:
    """What a format made of a batch's streams."""

    # output tables and work tables (batch/schema/work.py) as frames, by name (the Claude Code converter
    # writes its own from DuckDB as it goes: run/task.py `BatchParts.add_relation`)
    tables: dict[str, pl.DataFrame]
    inputs: list[dict] = field(default_factory=list)  # manifest inputs, one per stream read
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why) of streams that could not be read
