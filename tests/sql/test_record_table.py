"""The record table (sql/batch/records/record_table.sql): what relates the records of a session, from narrow columns alone."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import batch
from batch import sql
from conftest import CORPUS, FIXTURES, narrow_only, wide_columns

REGISTRY = FIXTURES / "registry" / "core"


def record_tables(src: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    """Convert `src`; for each batch, the record table the conversion used, and the one the same
    statement gives when `classified` has no wide column (`narrow_only`)."""
    materialize = sql.materialize
    tables = []

    def compared(con, name, *args, **kwargs):
        materialize(con, name, *args, **kwargs)
        if name == "record_table":
            used = con.table("record_table").pl()
            with narrow_only(con):
                narrow = sql.frame(con, "record_table")
            tables.append((used, narrow))

    monkeypatch.setattr(sql, "materialize", compared)
    batch.convert([src], out)
    assert tables
    return tables


def test_wide_columns_are_the_text_columns():
    assert wide_columns() == ["content", "json", "text_head", "tool_use_result", "top_content"]


@pytest.mark.parametrize("src", [CORPUS, REGISTRY], ids=["corpus", "registry-core"])
def test_the_record_table_reads_no_wide_column(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tables = record_tables(src, tmp_path / "out", monkeypatch)
    for used, narrow in tables:
        assert_frame_equal(narrow.sort("record_id"), used.sort("record_id"), check_row_order=True)
    table = pl.concat([used for used, _ in tables])
    # one row per record, and every relation it computes is found somewhere in these inputs
    assert table.height > 100 and not table.get_column("record_id").is_duplicated().any()
    assert table.select(
        pl.col("parent_record_id").is_not_null().any(),
        pl.col("logical_parent_record_id").is_not_null().any(),
        pl.col("copy_of_record_id").is_not_null().any(),
        (pl.col("status") == "withdrawn").any(),
        (pl.col("turn_id").is_not_null()).any(),
        (pl.col("attribution_mcp_server").is_not_null() if src == CORPUS else pl.lit(True)).any(),
        (pl.col("is_launch_prompt") if src == REGISTRY else pl.lit(True)).any(),
    ).row(0) == (True,) * 7

