"""The documented contract and the written tables agree with batch/schema.py."""

from __future__ import annotations


import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import batch
from batch.schema import DOCS_BEGIN, DOCS_END, LOSSES, TABLES, Col, Table, markdown
from batch.output.folder import Output
from batch.output.parts import SchemaMismatch
from conftest import ROOT

SAMPLE = ROOT / "data" / "sample"


def test_docs_hold_the_generated_table_section():
    text = (ROOT / "docs" / "asr-tables.md").read_text(encoding="utf-8")
    generated = text.split(DOCS_BEGIN, 1)[1].split(DOCS_END, 1)[0]
    assert generated.strip() == markdown().strip(), "run `make docs` to regenerate docs/asr-tables.md"


def test_every_column_is_documented():
    for table in TABLES:
        for col in table.cols:
            assert len(col.doc) > 10, f"{table.name}.{col.name} has no real description"


def test_written_tables_have_the_declared_schemas(tmp_path):
    out = tmp_path / "out"
    batch.convert([SAMPLE], out)
    for table in TABLES:
        files = sorted((out / table.name).glob("*.parquet"))
        assert files, table.name
        for f in files:
            schema = pq.read_schema(f)
            assert schema.names == table.names, f
            assert [fld.type for fld in schema] == [fld.type for fld in table.schema], f


# The writer enforces the declared schema: a relation that departs from it is a bug and fails loudly.

def _losses_frame(**overrides) -> pl.DataFrame:
    """A one-row frame with every declared column of `losses`, typed as declared."""
    empty = pl.from_arrow(LOSSES.schema.empty_table())
    row = pl.DataFrame([{c.name: None for c in LOSSES.cols}], schema=empty.schema)
    return row.with_columns(**overrides) if overrides else row


def test_a_declared_frame_is_written(tmp_path):
    output = Output(tmp_path / "out")
    assert output.write(LOSSES, _losses_frame(session_key=pl.lit("s"))) == 1
    output.abort()


def test_a_part_written_in_pieces_is_the_part_written_at_once(tmp_path):
    # a batch appends a table's rows to its part a piece at a time: the file holds the pieces' rows
    # in order, in the declared schema, a row group per piece (or per slice of one)
    output = Output(tmp_path / "out")
    frames = [_losses_frame(session_key=pl.lit(f"s{i}")) for i in range(3)]
    with output.open(LOSSES, 1) as part:
        assert [part.append(f) for f in frames] == [1, 1, 1]
    assert part.rows == 3
    assert output.write(LOSSES, pl.concat(frames), 2) == 3
    pieces, whole = (pq.ParquetFile(output.part("losses", i)) for i in (1, 2))
    assert pieces.metadata.num_row_groups == 3 and whole.metadata.num_row_groups == 1
    assert pieces.read().equals(whole.read()) and pieces.schema_arrow.equals(whole.schema_arrow, check_metadata=True)
    # a part opened and closed with nothing appended holds the schema and no row
    with output.open(LOSSES, 3):
        pass
    assert pq.read_table(output.part("losses", 3)).num_rows == 0
    assert pq.read_schema(output.part("losses", 3)).equals(LOSSES.schema, check_metadata=True)
    output.abort()


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (lambda: _losses_frame(surprise=pl.lit(1)), r"undeclared column losses\.surprise"),
        (lambda: _losses_frame().drop("session_key"), r"missing declared column losses\.session_key"),
        # a count given as text would be parsed into a number silently by a plain cast
        (lambda: _losses_frame(count=pl.lit("12")), r"losses\.count is (large_)?string(_view)?, declared int64"),
        # and a float would be rounded
        (lambda: _losses_frame(count=pl.lit(1.5)), r"losses\.count is double, declared int64"),
    ],
    ids=["undeclared-column", "missing-column", "text-as-number", "float-as-integer"],
)
def test_a_frame_that_departs_from_the_schema_fails_naming_table_and_column(tmp_path, frame, message):
    output = Output(tmp_path / "out")
    with pytest.raises(SchemaMismatch, match=message):
        output.write(LOSSES, frame())
    output.abort()


def test_a_lossy_cast_fails(tmp_path):
    narrow = Table("counts", "one row per test", "A table declaring a 32-bit count.", (Col("n", pa.int32(), "a count"),))
    output = Output(tmp_path / "out")
    with pytest.raises(SchemaMismatch, match=r"counts\.n: lossy cast from int64 to int32"):
        output.write(narrow, pa.table({"n": pa.array([2**40], pa.int64())}))
    output.abort()
