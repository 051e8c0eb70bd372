"""The documented contract and the written tables agree with batch/schema.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

import batch
from batch.schema import DOCS_BEGIN, DOCS_END, TABLES, markdown

ROOT = Path(__file__).parent.parent
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
