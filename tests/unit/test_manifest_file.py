"""manifest.json read a key at a time and written as it is encoded (batch/output/manifest.py)."""

from __future__ import annotations

import json

import pytest

from batch.output import manifest as mf

MANIFEST = {
    "format": {"name": "asr", "version": "0.1"},
    "inputs": [{"path": "p/ä€𝄞.jsonl", "size": 3, "note": "a \"quoted\" \\ line\nwith a newline"} for _ in range(40)],
    "tables": {"sessions": 2, "records": 0},
    "empty": [],
    "_meta": {"com.anthropic.claude-code/unassigned": [{"kind": "session_info", "value": "é"}]},
    "last": "  \"not\": a key",
}


@pytest.fixture(params=[1 << 20, 7], ids=["one chunk", "7-byte chunks"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(mf, "CHUNK", request.param)
    return request.param


def test_written_as_json_dump_writes_it(tmp_path, chunk):
    path = tmp_path / "manifest.json"
    mf.write(path, MANIFEST)
    assert path.read_text(encoding="utf-8") == json.dumps(MANIFEST, indent=2) + "\n"


def test_each_key_is_read_alone_and_copied_byte_for_byte(tmp_path, chunk):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(MANIFEST, indent=2) + "\n", encoding="utf-8")
    spans = mf.index(path)
    assert list(spans) == list(MANIFEST)
    assert {k: s.parse() for k, s in spans.items()} == MANIFEST
    assert mf.read_keys(path, ("tables", "missing")) == {"tables": MANIFEST["tables"]}
    kept = mf.read(path, keep=("inputs", "_meta"))
    assert isinstance(kept["inputs"], mf.Span) and kept["tables"] == MANIFEST["tables"]
    again = tmp_path / "again.json"
    mf.write(again, {**kept, "tables": {"sessions": 3}})
    assert json.loads(again.read_text(encoding="utf-8")) == {**MANIFEST, "tables": {"sessions": 3}}


def test_a_manifest_not_laid_out_so_is_parsed_whole(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(MANIFEST), encoding="utf-8")  # one line, as a hand edit may leave it
    assert mf.index(path) is None
    assert mf.read(path, keep=("inputs",)) == MANIFEST
    assert mf.read_keys(path, ("format",)) == {"format": MANIFEST["format"]}
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError):
        mf.read(path)


def test_a_fragment_duckdb_wrote_is_spliced_in(tmp_path, chunk):
    fragment = tmp_path / "facts.json"
    fragment.write_text('[\n\t{"kind":"session_info","value":"a 𝄞 b"},\n\t{"kind":"k","value":null}\n]\n', encoding="utf-8")
    value = mf.Pieces(('{\n    "facts": ', mf.Span(fragment, 0, fragment.stat().st_size - 1), "\n  }"))
    path = tmp_path / "manifest.json"
    mf.write(path, {"format": 1, "_meta": value, "files": {}})
    want = {"format": 1, "_meta": {"facts": [{"kind": "session_info", "value": "a 𝄞 b"}, {"kind": "k", "value": None}]},
            "files": {}}
    assert json.loads(path.read_text(encoding="utf-8")) == want
    assert mf.index(path)["_meta"].parse() == want["_meta"]


def test_a_fragment_nested_in_a_value_is_spliced_where_it_is(tmp_path, chunk):
    """A report whose list DuckDB wrote: the report's other members encoded as `write` encodes them."""
    fragment = tmp_path / "absent.json"
    fragment.write_text('[\n\t{"name":"a\\u0000span 0\\u0000 𝄞","at":null}\n]\n', encoding="utf-8")
    report = {"usage": ["x", {"y": "\u00e9 \"q\""}], "retention": {"policy": "p", "absent_files": mf.Span(
        fragment, 0, fragment.stat().st_size - 1)}, "last": 1}
    value = mf.around(report)
    assert isinstance(value, mf.Pieces) and mf.around({"a": [1]}) == {"a": [1]}
    path = tmp_path / "manifest.json"
    mf.write(path, {"format": 1, "export_report": value, "files": {}})
    want = {**report, "retention": {"policy": "p", "absent_files": [{"name": "a\0span 0\0 𝄞", "at": None}]}}
    assert json.loads(path.read_text(encoding="utf-8")) == {"format": 1, "export_report": want, "files": {}}
    assert list(mf.index(path)) == ["format", "export_report", "files"]


@pytest.mark.parametrize("count", [0, 1, 40], ids=["none", "one", "many"])
def test_an_array_written_apart_is_spliced_as_json_dump_writes_it(tmp_path, count):
    inputs = MANIFEST["inputs"][:count]
    span = mf.write_array(tmp_path / "inputs.json", (json.dumps(i, separators=(",", ":")) for i in inputs))
    path = tmp_path / "manifest.json"
    mf.write(path, {**MANIFEST, "inputs": span})
    assert path.read_text(encoding="utf-8") == json.dumps({**MANIFEST, "inputs": inputs}, indent=2) + "\n"
    assert span.parse() == inputs


FILES = {
    **{f"records/part-{i:05d}.parquet": [10 ** (i % 13), "0123456789abcdef" * 4] for i in range(30)},
    "_work/t/part-00001.parquet": [7, None],
    "sessions/part-ä𝄞 \"q\".parquet": [123456789012, "x"],
}


@pytest.mark.parametrize("count", [0, 1, 32], ids=["none", "one", "many"])
def test_an_object_written_apart_is_spliced_as_json_dump_writes_it_and_read_an_item_at_a_time(tmp_path, chunk, count):
    """The part files' record: written an entry at a time, read back an entry at a time across chunks
    (numbers split by a chunk's end read whole), the same as parsing the manifest whole."""
    files = dict(list(FILES.items())[:count])
    span = mf.write_object(tmp_path / "files.json", files.items())
    path = tmp_path / "manifest.json"
    mf.write(path, {**MANIFEST, "files": span})
    assert path.read_text(encoding="utf-8") == json.dumps({**MANIFEST, "files": files}, indent=2) + "\n"
    assert list(mf.items(path, "files")) == list(files.items())
    assert list(mf.items(path, "tables")) == list(MANIFEST["tables"].items())
    assert list(mf.items(path, "inputs")) == [] and list(mf.items(path, "missing")) == []
    path.write_text(json.dumps({**MANIFEST, "files": files}), encoding="utf-8")  # one line: parsed whole
    assert list(mf.items(path, "files")) == list(files.items())


def test_an_object_that_is_not_json_is_an_error_when_its_item_is_read(tmp_path, chunk):
    path = tmp_path / "manifest.json"
    path.write_text('{\n  "format": 1,\n  "files": {\n    "a": [1, "x"],\n    "b" [2]\n  }\n}\n', encoding="utf-8")
    items = mf.items(path, "files")
    assert next(items) == ("a", [1, "x"])
    with pytest.raises(ValueError):
        next(items)


def test_the_runs_inputs_are_written_sorted_by_path_with_their_summary(tmp_path):
    """WrittenInputs reads the batches' entries as columns; what it writes and says of them is what a
    plain reading of the entries gives: a stable sort by path, the bytes, the foreign files, the versions."""
    from batch.incremental.state import InputEntries
    from batch.output.folder import Output
    from batch.run.finalize import WrittenInputs

    batches = [
        [{"path": "p/z.jsonl", "size": 3, "status": "converted", "versions": ["2.1.9", "2.1.10"]},
         {"path": "p/a\u00e9\"b.jsonl", "size": 5, "status": "foreign"},
         {"path": "p/a.jsonl", "size": 7, "status": "converted", "versions": []}],
        [],
        [{"path": "c/r.jsonl", "size": 11, "status": "converted", "format": "codex-rollout-jsonl", "versions": ["0.104.0"]},
         {"path": "p/a.jsonl", "size": 1, "status": "converted", "sha256": "x", "versions": ["1.0.17"]}],
    ]
    output = Output(tmp_path / "out")
    written = WrittenInputs.write(output, [InputEntries(b) for b in batches])
    every = [e for b in batches for e in b]
    assert written.text.parse() == sorted(
        every, key=lambda e: e["path"])
    assert (written.count, written.size, written.foreign) == (5, 27, 1)
    assert written.versions == ["1.0.17", "2.1.9", "2.1.10"] and written.codex_versions == ["0.104.0"]
    alone = WrittenInputs.write(output, [InputEntries(batches[0])])
    assert alone.codex_versions is None and alone.versions == ["2.1.9", "2.1.10"]
    assert WrittenInputs.write(output, []).count == 0
