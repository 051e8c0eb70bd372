"""The sessions' groups and their sources' reads, written by settling and read by DuckDB for the
final stage's `sessions` (batch/run/finalize.py `SourceReads`)."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb

from batch.incremental.state import Batch
from batch.run.finalize import SourceReads


def _tables(found: SourceReads) -> tuple[list, list]:
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    found.register(con)
    return (sorted(con.sql("select * from session_groups").fetchall()),
            sorted(con.sql("select owner, present, read_at from source_reads").fetchall()))


def test_a_sessions_group_is_the_first_its_inputs_give_else_its_own(tmp_path):
    def fp(name: str) -> list:
        return [[name, 1, 1, None]]

    batches = [
        Batch("a", {"g1": fp("f1.jsonl"), "g2": fp("f2.jsonl")},
              [{"path": "f1.jsonl", "session_key": "s1"}, {"path": "f2.jsonl", "session_key": "s2"},
               {"path": "elsewhere.jsonl", "session_key": "s3"}], (), {}),
        Batch("b", {"g3": fp("f3.jsonl")},
              [{"path": "f3.jsonl", "session_key": "s1"}, {"path": "f3.jsonl", "session_key": "g1"},
               {"path": "f3.jsonl"}], (), {}),
    ]
    reads = {"g1": ["2026-12-07T02:15:50.073666Z", True], "g2": [None, False], "g3": ["not a time", True]}
    written = SourceReads.write(tmp_path, reads.items())
    assert list(written.items()) == list(reads.items())  # as the reuse state holds them
    groups, read = _tables(written.with_groups(batches))
    # s1: batch a's group (the first); g1: given as a session of g3 by an input, before its own;
    # s3: its input's file is of no group of its batch
    assert groups == [("g1", "g3"), ("g2", "g2"), ("g3", "g3"), ("s1", "g1"), ("s2", "g2")]
    assert read == [("g1", True, datetime(2026, 12, 7, 2, 15, 50, 73666, tzinfo=UTC)), ("g2", False, None),
                    ("g3", True, None)]


def test_no_group_gives_empty_tables(tmp_path):
    assert _tables(SourceReads.write(tmp_path / "spill", []).with_groups([])) == ([], [])
