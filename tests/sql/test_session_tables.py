"""The narrow session tables (sql/batch/records/call_pairs.sql, sql/batch/records/session_uuids.sql,
sql/batch/sessions/session_facts.sql): what the fact statements need from a whole session, from narrow
columns alone."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import batch
from batch import sql
from batch.run import task
from conftest import CORPUS, FIXTURES, narrow_only

REGISTRY = FIXTURES / "registry" / "core"

WORKSPACE = REGISTRY.parent / "workspace"  # cost-state lines

SESSION_TABLES = ("call_pairs", "session_uuids", "session_facts")
KEYS = {
    "call_pairs": ["session_key", "call_id", "requested_by", "call_record_id", "result_record_id"],
    "session_uuids": ["session_key", "uuid"],
    "session_facts": ["session_key"],
}


def session_tables(src: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    """Convert `src`; for each batch and session table, the table the conversion used, and the one the
    same statement gives when `classified` has no wide column and no records or parts are defined
    (a statement reading one fails by its name). Also the batch's tool_calls."""
    materialize, add_relation = sql.materialize, task.BatchParts.add_relation
    tables: dict[str, list] = {name: [] for name in (*SESSION_TABLES, "tool_calls")}

    def compared(con, name, *args, **kwargs):
        materialize(con, name, *args, **kwargs)
        if name in SESSION_TABLES:
            used = con.table(name).pl()
            with narrow_only(con):
                narrow = sql.frame(con, name)
            tables[name].append((used, narrow))

    def written(self, con, name, relation, *args, **kwargs):
        if name == "tool_calls":
            tables["tool_calls"].append(con.table(relation).pl())
        return add_relation(self, con, name, relation, *args, **kwargs)

    monkeypatch.setattr(sql, "materialize", compared)
    monkeypatch.setattr(task.BatchParts, "add_relation", written)
    batch.convert([src], out)
    return tables


@pytest.mark.parametrize("src", [CORPUS, REGISTRY, WORKSPACE], ids=["corpus", "registry-core", "registry-workspace"])
def test_the_session_tables_read_no_wide_column(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tables = session_tables(src, tmp_path / "out", monkeypatch)
    for name in SESSION_TABLES:
        assert tables[name], name  # computed in every batch
        for used, narrow in tables[name]:
            keys = KEYS[name]
            assert_frame_equal(narrow.sort(keys, nulls_last=True), used.sort(keys, nulls_last=True), check_row_order=True)
    pairs = pl.concat([used for used, _ in tables["call_pairs"]])
    calls = pl.concat(tables["tool_calls"])
    # one pair per row of tool_calls, the same records on both sides
    columns = ["session_key", "call_id", "requested_by", "tool_name", "call_record_id", "result_record_id"]
    assert_frame_equal(
        pairs.select(columns).sort(columns, nulls_last=True), calls.select(columns).sort(columns, nulls_last=True)
    )
    uuids = pl.concat([used for used, _ in tables["session_uuids"]])
    assert uuids.height > 50 and not uuids.select("session_key", "uuid").is_duplicated().any()
    if src == CORPUS:
        # model calls with and without a result, and a user's shell command with its output
        assert pairs.select(
            (pl.col("requested_by") == "model").any().alias("model"),
            pl.col("result_record_id").is_null().any().alias("pending"),
            ((pl.col("requested_by") == "user") & pl.col("result_record_id").is_not_null()).any().alias("shell"),
        ).row(0) == (True,) * 3
    if src == WORKSPACE:
        facts = pl.concat([used for used, _ in tables["session_facts"]])
        assert facts.get_column("last_cost_state_seq").is_not_null().any()
