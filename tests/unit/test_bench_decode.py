"""bench/decode.py: its statements follow the converter's SQL files and decode the same blocks in one
parse as in two; nothing here is timed."""

from __future__ import annotations

import json
import sys

import duckdb
import pyarrow as pa
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import decode  # noqa: E402

LINES = [
    {"type": "assistant", "uuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [
        {"type": "text", "text": "it's done"},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
    ]}},
    {"type": "user", "uuid": "u2", "message": {"role": "user", "content": "a plain string"}},
    {"type": "user", "uuid": "u3", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": False},
    ]}},
]


def test_the_lines_read_are_whole_and_stop_at_the_size(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"n": 1}\n\n{"n": 2}\n{"n": 3}\n')
    (folder / "b.jsonl").write_text('{"n": 4}\n')
    assert decode.lines_of(tmp_path, 1 << 20) == ['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}']
    assert decode.lines_of(tmp_path, len('{"n": 1}') + 1) == ['{"n": 1}', '{"n": 2}']


def test_one_parse_types_the_blocks_that_two_parses_decode():
    statements = decode.statements()
    assert len(statements) == 4
    con = duckdb.connect()
    con.register("objects", pa.table({"json": [json.dumps(line) for line in LINES]}))
    two = con.sql(statements["that envelope + the blocks decoded from its content's text"]).fetchall()
    one = con.sql(statements["the envelope with the content's blocks typed, one parse"]).fetchall()
    two_blocks = [[(b["type"], b["text"], b["id"], b["tool_use_id"]) for b in blocks] for _, blocks in two]
    one_blocks = [[(b["type"], b["text"], b["id"], b["tool_use_id"]) for b in (e["message"]["content"] or [])] for (e,) in one]
    expected = [
        [("text", "it's done", None, None), ("tool_use", None, "toolu_1", None)],
        [],  # a string content holds no array of blocks
        [("tool_result", None, None, "toolu_1")],
    ]
    assert two_blocks == expected
    assert one_blocks == expected
