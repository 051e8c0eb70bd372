"""Rows of Python values as frames with the exact columns and types of an output table."""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa

from batch.schema.base import Table


def to_frame(rows: list[dict], table: Table) -> pl.DataFrame:
    """Rows as a frame with exactly the table's columns and types; keys a row lacks are null."""
    schema = table.schema
    return pl.from_arrow(pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in schema.names}, schema=schema))


def dump_json(value: object) -> str | None:
    """Compact JSON text of a value, or None for None."""
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
