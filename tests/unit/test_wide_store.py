"""The store of a large batch's wide rows (batch/formats/claude_code/store.py): Parquet files read back as views,
in pieces, and merged from sorted runs."""

from __future__ import annotations

import gc
import random
import tempfile
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from batch.formats.claude_code import store as store_module
from batch.formats.claude_code.store import Store


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("set temp_directory = $path", {"path": str(tmp_path / "spill")})
    yield con
    con.close()


def runs(seed: int) -> list[pl.DataFrame]:
    """Sorted runs with keys repeated within and across runs, nulls included, and a payload that
    tells every row apart."""
    rng = random.Random(seed)
    frames = []
    for run in range(rng.randint(2, 6)):
        n = rng.randint(0, 40)
        frame = pl.DataFrame({
            "key": [rng.choice(["a", "b", "c", None]) for _ in range(n)],
            "seq": [rng.randint(0, 3) for _ in range(n)],
            "payload": [f"run {run} row {i} " + "x" * rng.randint(0, 200) for i in range(n)],
        }, schema={"key": pl.String, "seq": pl.Int64, "payload": pl.String})
        frames.append(frame.sort("key", "seq", nulls_last=True, maintain_order=True))
    return frames


@pytest.mark.parametrize("seed", range(8))
def test_a_merge_of_sorted_runs_is_the_stable_sort_of_their_concatenation(con, monkeypatch, seed):
    # with frames of a few hundred bytes (several per run), the merged rows are those of the
    # concatenation sorted by the keys, rows with equal keys in run order and then row order
    monkeypatch.setattr(store_module, "MERGE_BYTES", 300)
    store = Store(con)
    frames = runs(seed)
    for frame in frames:
        store.append("t", frame)
    pieces = list(store.merged("t", ("key", "seq")))
    expected = pl.concat(frames).sort("key", "seq", nulls_last=True, maintain_order=True)
    assert_frame_equal(pl.concat(pieces) if pieces else expected.clear(), expected)
    assert expected.height < 20 or len(pieces) > 1
    only = pl.concat(list(store.merged("t", ("key", "seq"), ["payload"])) or [expected.clear().select("payload")])
    assert_frame_equal(only, expected.select("payload"))


def test_a_stored_table_reads_as_a_view_and_back_in_pieces(con, monkeypatch):
    monkeypatch.setattr(store_module, "MERGE_BYTES", 1 << 10)
    store = Store(con)
    frames = [pl.DataFrame({"i": range(k * 100, k * 100 + 100), "s": ["y" * 50] * 100}) for k in range(3)]
    for frame in frames:
        store.append("t", frame)
    assert store.rows["t"] == 300
    assert con.sql("select count(*), sum(i) from t").fetchall() == [(300, sum(range(300)))]
    pieces = list(store.read("t"))
    assert len(pieces) > 3
    assert_frame_equal(pl.concat(pieces), pl.concat(frames))
    store.drop("t")
    assert "t" not in store.files
    with pytest.raises(duckdb.CatalogException):
        con.sql("select * from t").fetchall()


def test_the_store_folder_goes_with_the_store(con):
    # the store's files are in a folder of the connection's temporary directory, removed with it
    store = Store(con)
    store.append("t", pl.DataFrame({"i": [1, 2]}))
    folder = store.folder
    assert folder.is_dir() and folder.parent == Path(con.sql("select current_setting('temp_directory')").fetchall()[0][0])
    con.execute("drop view t")
    del store
    gc.collect()
    assert not folder.exists()


def test_a_store_limits_duckdb_memory_until_release(con):
    from batch import sql

    default = con.sql("select current_setting('memory_limit')").fetchall()[0][0]
    Store(con)
    limited = con.sql("select current_setting('memory_limit')").fetchall()[0][0]
    assert limited != default
    sql.flush(con)  # a flush keeps the limit
    assert con.sql("select current_setting('memory_limit')").fetchall()[0][0] == limited
    sql.release(con)
    assert con.sql("select current_setting('memory_limit')").fetchall()[0][0] == default


def converted(files, **constants) -> tuple[dict[str, pl.DataFrame], list, list]:
    """claude_code.convert of `files` with the constants of claude_code.converter given, each table as one frame."""
    from batch import sql
    from batch.formats import claude_code
    from batch.formats.claude_code import converter

    saved = {name: getattr(converter, name) for name in constants}
    try:
        for name, value in constants.items():
            setattr(converter, name, value)
        con = duckdb.connect()
        con.execute("set temp_directory = $path", {"path": tempfile.mkdtemp()})
        sql.define_macros(con)
        result = claude_code.convert(con, files, tool_result_files=set())
        tables = {
            name: rows if isinstance(rows, pl.DataFrame) else pl.concat(list(rows), how="vertical")
            for name, rows in result.tables.items()
        }
        return tables, result.inputs, result.skipped
    finally:
        for name, value in saved.items():
            setattr(converter, name, value)


def test_hostile_streams_convert_alike_with_a_store():
    # the lines a store's batch keeps the text of (rejected lines, each file's first), recovered `}{`
    # lines, a foreign file, a BOM, invalid UTF-8, lines after the last newline, a stream that fails
    # mid-file: every table is the same, row for row and in order, with a store and chunks of a few
    # KiB as without
    from conftest import CORPUS
    from test_line_reader import STREAMS, stream

    session = (CORPUS / "marot-spotter" / "short.jsonl").read_bytes()
    lines = session.split(b"\n")
    glued = b"\n".join([*lines[:5], lines[5] + lines[6], *lines[7:]])  # a `}{` line
    files = [
        *STREAMS,
        stream("session.jsonl", session),
        stream("glued.jsonl", glued),
        stream("truncated.jsonl", session[: len(session) // 2 + 7]),
        stream("pretty.jsonl", b'{\n  "type": "user",\n  "uuid": "x"\n}\n'),
    ]
    plain = converted(files)
    stored = converted(files, STORE_BYTES=0, PASS2_CHUNK_BYTES=1 << 12)
    assert stored[1:] == plain[1:]
    assert stored[0].keys() == plain[0].keys()
    # (a timestamp read back from a store's file names its zone UTC, where DuckDB's frame says
    # Etc/UTC: the same instants, and the same type once written in the table's schema)
    utc = pl.col(pl.Datetime("us", "Etc/UTC")).dt.convert_time_zone("UTC")
    for name, frame in plain[0].items():
        assert_frame_equal(stored[0][name].with_columns(utc), frame.with_columns(utc), check_row_order=True)
    assert plain[0]["rejects"].height > 3 and plain[0]["records"].height > 10
