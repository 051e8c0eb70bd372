"""A statement that does not fit the final stage's or the catalog's memory limit runs again without
it (batch/sql.py `within_limit`): the limit bounds memory, it never fails a run."""

from __future__ import annotations

import duckdb
import pytest

from batch import sql

BIG = "create or replace table t as select list(range) as l from range(2000000)"


def test_a_statement_over_the_limit_runs_again_without_it():
    con = duckdb.connect(config={"memory_limit": "4MiB"})
    with pytest.raises(duckdb.OutOfMemoryException):
        con.execute(BIG)  # it does not fit: the fallback below is needed
    sql.within_limit(con, lambda: con.execute(BIG))
    assert con.sql("select len(l) from t").fetchall() == [(2_000_000,)]
    assert con.sql("select current_setting('memory_limit')").fetchall()[0][0] != "4.0 MiB"


def test_other_errors_are_not_retried():
    con = duckdb.connect(config={"memory_limit": "4MiB"})
    calls = []

    def failing():
        calls.append(1)
        con.execute("select * from no_such_table")

    with pytest.raises(duckdb.CatalogException):
        sql.within_limit(con, failing)
    assert calls == [1]
    assert con.sql("select current_setting('memory_limit')").fetchall()[0][0] == "4.0 MiB"
