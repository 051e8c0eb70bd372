"""A large batch of the Claude Code converter (formats/claude_code/converter.py): it runs within
DuckDB's memory limit LARGE_BATCH_MEMORY, beyond which its tables spill, and writes the same rows."""

from __future__ import annotations

import duckdb
import pytest
from polars.testing import assert_frame_equal

from batch import sql
from batch.formats.claude_code import converter
from conftest import CORPUS, convert_streams
from test_line_reader import STREAMS, stream


def test_hostile_streams_convert_alike_within_a_memory_limit(monkeypatch):
    # the lines a batch keeps the text of (rejected lines, each file's first), recovered `}{` lines,
    # a foreign file, a BOM, invalid UTF-8, lines after the last newline, a stream that fails
    # mid-file: every table is the same, row for row and in order, in a large batch within a memory
    # limit of 48 MiB as in an ordinary one
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
    plain = convert_streams(files)
    limits = []
    materialize = sql.materialize

    def seen(con, name, *args, **kwargs):
        limits.append(con.sql("select current_setting('memory_limit')").fetchall()[0][0])
        return materialize(con, name, *args, **kwargs)

    monkeypatch.setattr(sql, "materialize", seen)
    large = convert_streams(files, LARGE_BATCH_BYTES=0, LARGE_BATCH_MEMORY=48 << 20)
    assert limits and set(limits) == {"48.0 MiB"}
    assert large[1:] == plain[1:]
    assert large[0].keys() == plain[0].keys()
    for name, frame in plain[0].items():
        assert_frame_equal(large[0][name], frame, check_row_order=True)
    assert plain[0]["rejects"].height > 3 and plain[0]["records"].height > 10


def test_a_large_batch_limit_ends_with_its_release(tmp_path):
    con = duckdb.connect()
    con.execute("set temp_directory = $path", {"path": str(tmp_path / "spill")})
    sql.define_macros(con)
    default = con.sql("select current_setting('memory_limit')").fetchall()[0][0]

    session = (CORPUS / "marot-spotter" / "short.jsonl").read_bytes()
    converter_limit = []
    real = converter._statements

    def during(con, *args):
        converter_limit.append(con.sql("select current_setting('memory_limit')").fetchall()[0][0])
        return real(con, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(converter, "LARGE_BATCH_BYTES", 0)
        patch.setattr(converter, "_statements", during)
        converter.convert(con, [stream("session.jsonl", session)], write=lambda *args: None)
    assert converter_limit and converter_limit[0] != default
    sql.flush(con)  # a flush keeps the limit
    assert con.sql("select current_setting('memory_limit')").fetchall()[0][0] == converter_limit[0]
    sql.release(con)
    assert con.sql("select current_setting('memory_limit')").fetchall()[0][0] == default
