"""Long strings elided before the decode change no row: every table of the corpus converted with
small thresholds (thousands of strings elided) is the same, file for file and row for row, as
without; and each form of an elided string (as written, decoded, written again by DuckDB) comes
back exactly."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import CORPUS, SAMPLE, read_manifest, read_tables, sorted_rows, timeless
from polars.testing import assert_frame_equal

import batch
from batch.transforms import elide
from batch.transforms.elide import Elided, Unrestored


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Strings of 2,000 characters and more elided, with 1,000 kept before the sentinel and 300
    after (more than the statements read of a notification's head in the corpus); counts the
    strings each batch elided."""
    monkeypatch.setattr(elide, "ELIDE_CHARS", 2000)
    monkeypatch.setattr(elide, "PREFIX_CHARS", 1000)
    monkeypatch.setattr(elide, "SUFFIX_CHARS", 300)
    counts: dict[str, int] = defaultdict(int)
    restore = Elided.restore

    def counted(self, value):
        counts["batches"] += 1
        counts["strings"] = max(counts["strings"], len(self.rests))
        return restore(self, value)

    monkeypatch.setattr(Elided, "restore", counted)
    return counts


@pytest.mark.parametrize("large", [False, True], ids=["batch", "large"])
def test_elided_strings_change_no_row(corpus_out: Path, tmp_path: Path, monkeypatch, small, large):
    if large:  # every batch within a large batch's memory limit (formats/claude_code/converter.py)
        from batch.formats.claude_code import converter

        monkeypatch.setattr(converter, "LARGE_BATCH_BYTES", -1)
        monkeypatch.setattr(converter, "LARGE_BATCH_MEMORY", 192 << 20)
    out = tmp_path / "out"
    batch.convert([CORPUS], out)
    assert small["strings"] > 500  # the largest batch's elided strings: the restore was exercised
    files = sorted(p.relative_to(corpus_out) for p in corpus_out.rglob("*.parquet"))
    assert files == sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    for name in files:
        got, want = pl.read_parquet(out / name), pl.read_parquet(corpus_out / name)
        assert_frame_equal(timeless(got), timeless(want), check_row_order=True)
        assert pq.read_schema(out / name).equals(pq.read_schema(corpus_out / name), check_metadata=True)
    for text in ("\ue000asr:", "\\uE000asr:"):  # no sentinel left in any string of any table
        for table, frame in read_tables(out).items():
            strings = [c for c, dt in frame.schema.items() if dt == pl.String]
            held = frame.select(pl.any_horizontal(pl.col(strings).str.contains(text, literal=True)).any()).item()
            assert held in (False, None), table


LONG = "".join(
    f"line {i}: \"quoted\" back\\slash tab\t é ü 😀 \x1b[31mred\x1b[0m / end\n" for i in range(400)
)


def line_with(value: str) -> str:
    """A Claude Code-like line holding `value` twice: as a text block and in toolUseResult."""
    return json.dumps({
        "type": "user", "uuid": "u1",
        "message": {"role": "user", "content": [{"type": "text", "text": value}]},
        "toolUseResult": {"stdout": value, "code": 0},
    })


def reduced(text: str, elided: Elided) -> str:
    return elided.reduce(pl.Series([text])).item()


def restored(value: str, elided: Elided) -> str:
    return next(elided.restore(pl.DataFrame({"v": [value]}))).item()


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii-escapes", "utf8"])
def test_each_form_of_an_elided_string_is_restored_exactly(small, ascii_only):
    text = json.dumps(json.loads(line_with(LONG)), ensure_ascii=ascii_only)
    elided = Elided()
    short = reduced(text, elided)
    assert len(elided.rests) == 1 and len(short) < len(text) // 3  # one string, elided where it is twice
    # as written (records.native): the line itself
    assert restored(short, elided) == text
    # decoded (parts.text): what a JSON reader reads, from the reduced line through DuckDB
    con = duckdb.connect()
    [(text_value, stdout_json, result_json)] = con.execute(
        "select ?::json ->> '$.message.content[0].text', ?::json -> '$.toolUseResult.stdout', "
        "?::json -> '$.toolUseResult'", [short] * 3).fetchall()
    assert restored(text_value, elided) == LONG
    # written again by DuckDB (tool_calls.result_native): as DuckDB writes the original
    [(want_stdout, want_result)] = con.execute(
        "select ?::json -> '$.toolUseResult.stdout', ?::json -> '$.toolUseResult'", [text] * 2).fetchall()
    assert restored(stdout_json, elided) == want_stdout
    assert restored(result_json, elided) == want_result
    assert json.loads(restored(result_json, elided))["stdout"] == LONG


@pytest.mark.parametrize("value", [
    "\\ud83d" * 2100,  # lone halves of surrogate pairs: no UTF-8
    "a\\x" * 1000,  # an escape JSON does not have
], ids=["surrogates", "bad-escape"])
def test_a_string_whose_decode_is_uncertain_is_kept_whole(small, value):
    text = '{"type": "user", "text": "' + value + '"}'
    elided = Elided()
    assert reduced(text, elided) == text and not elided.rests


def test_a_line_with_a_control_character_is_kept_whole(small):
    text = '{"type": "user", "text": "' + "x" * 3000 + '",\t"n": 1}'
    elided = Elided()
    assert reduced(text, elided) == text and not elided.rests


def test_the_cut_never_falls_inside_an_escape(small):
    # strings of escapes only, of each kind: the reduced line is valid JSON whose string decodes to the
    # start of the string, the sentinel and its end; the restore gives the line back
    for escape in ("\\n", "x\\\\", '\\"', "\\u00e9", "\\u001b", "\\ud83d\\ude00"):
        value = json.loads(f'"{escape * 1500}"')
        text = json.dumps({"v": value}, ensure_ascii=True)
        elided = Elided()
        short = reduced(text, elided)
        assert len(elided.rests) == 1, escape
        head, rest = json.loads(short)["v"].split("\ue000asr:")
        tail = rest.split('"\ue001')[1]
        # at least 1000 characters as written before the sentinel: 83 of a pair of escapes (12 each)
        assert value.startswith(head) and value.endswith(tail) and len(head) >= 1000 // 12 and tail, escape
        assert restored(short, elided) == text


def test_a_value_left_with_a_sentinel_raises_unrestored(small):
    elided = Elided()
    elided.rests["0" * 32] = "rest"
    assert restored('x\ue000asr:' + "0" * 32 + '"\ue001', elided) == "xrest"
    with pytest.raises(Unrestored):  # written again inside JSON text (escaped twice): not a form restore knows
        restored('x\\\\uE000asr:' + "0" * 32 + '\\\\\\"\\\\uE001', elided)


def test_a_batch_that_cannot_be_restored_is_converted_again_without_elision(small, monkeypatch, tmp_path):
    # as after running out of memory: converted again a group at a time, then with its lines decoded whole
    src = tmp_path / "projects"
    (src / "-demo").mkdir(parents=True)
    for f in (SAMPLE / "-Users-demo-viewer").glob("*.jsonl"):
        (src / "-demo" / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(elide, "_SENTINEL", elide.re.compile("(?P<v>$^)"))  # restore finds no sentinel
    out, plain = tmp_path / "out", tmp_path / "plain"
    result = batch.convert([src], out)
    assert small["strings"] > 0 and "session_groups_not_converted" not in result.manifest["reuse"]
    monkeypatch.undo()
    batch.convert([src], plain)
    got, want = read_tables(out), read_tables(plain)
    for name in got:
        assert_frame_equal(sorted_rows(timeless(got[name])), sorted_rows(timeless(want[name])), check_row_order=True)
    assert read_manifest(out)["rejected_lines"] == read_manifest(plain)["rejected_lines"] == 0


def test_a_position_between_two_characters_is_told_exactly():
    # against a tokenizer of JSON strings as written (a surrogate pair is one character), at every
    # position of random strings of letters, backslashes, quotes, control and non-ASCII characters
    import random
    import re

    unit = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\.|[^\\]", re.S)
    rng = random.Random(7)
    alphabet = ["a", "u", "\\", '"', "\n", "é", "😀", "\x1b", "0", "f", "\ud7ff"]
    for _ in range(2000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        written = json.dumps(value, ensure_ascii=rng.random() < 0.5)[1:-1]
        ends = {m.end() for m in unit.finditer(written)}
        for q in range(1, len(written)):
            assert elide._between(written, 0, q) == (q in ends), (written, q)
