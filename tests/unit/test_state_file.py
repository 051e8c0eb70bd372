"""The reuse state file, written a piece at a time (batch/incremental/state.py)."""

from __future__ import annotations

import json
import pickle

import pytest

from batch.errors import OutputError
from batch.incremental import state as st
from batch.incremental.state import Batch, State
from batch.sources.base import fingerprint_of, fingerprint_texts


def _state(n: int) -> State:
    batches = tuple(
        Batch(f"{i:016x}", {f"owner-{i}": [[f"p/{i}.jsonl", 10 + i, 1_700_000_000_000_000_000 + i, None]]},
              ({"path": f"p/{i}.jsonl", "size": 10 + i, "note": "ä \"q\""},), ((f"p/{i}.txt", "not a .jsonl file"),),
              {"records": i}, ("session_streams",), {"records": (i,)}, "0.3.0" if i % 7 == 0 else None)
        for i in range(n)
    )
    heads = {f"p/{i}.jsonl": [10 + i, i, None, f"s{i}"] for i in range(n)}
    reads = {f"owner-{i}": ["2026-12-06T00:00:00.000000Z", bool(i % 2)] for i in range(n)}
    return State("key", None, heads, {}, batches, reads, None)


@pytest.mark.parametrize("n", [0, 1, 3, 9000], ids=["empty", "one", "three", "more than a slice"])
def test_written_as_json_dumps_writes_it_and_read_back(tmp_path, n):
    state = _state(n)
    st.write(tmp_path, state)
    text = (tmp_path / "_reuse.json").read_text(encoding="utf-8")
    assert text == json.dumps(state.to_json(), separators=(",", ":")) + "\n"
    back = st.read(tmp_path)
    assert back is not None and back.batches == state.batches and dict(back.heads.items()) == dict(state.heads)
    assert dict(back.reads.items()) == state.reads
    assert [list(b.inputs) for b in back.batches] == [[{"path": f"p/{i}.jsonl", "size": 10 + i, "note": "ä \"q\""}]
                                                       for i in range(n)]


def test_a_batch_holds_its_inputs_as_text_and_gives_them_back_as_given():
    given = [{"path": "a.jsonl", "size": 1, "versions": ["2.1.0"]}, {"path": "b\nc.jsonl", "size": 2, "provenance": [{"x": 1}]}]
    batch = Batch("p", {}, tuple(given), (), {})
    assert isinstance(batch.inputs, st.InputEntries) and len(batch.inputs) == 2 and list(batch.inputs) == given
    assert batch.inputs.json_text() == json.dumps(given, separators=(",", ":"))
    assert batch == Batch("p", {}, given, (), {}) and batch != Batch("p", {}, given[:1], (), {})
    assert len(Batch("p", {}, (), (), {}).inputs) == 0 and list(Batch("p", {}, (), (), {}).inputs) == []


def test_the_batches_a_run_takes_are_spooled_and_written_as_the_state_lists_them(tmp_path):
    """A run holds per batch only where its entry is: iterating gives the batches back as taken, the
    state written from the spool (sorted by part, a stable sort) is the one written from the objects."""
    state = _state(12)
    taken = [state.batches[i] for i in (5, 0, 11, 3, 3, 7, 1, 2, 4, 6, 8, 9, 10)]  # a part taken twice
    log = st.BatchLog(tmp_path / "_spill" / "batches.jsonl")
    for batch in taken:
        log.add(batch)
    assert len(log) == 13 and list(log) == taken
    assert log.parts_as_written() == {b.part for b in taken if b.written_by}  # 0 and 7
    log.sort()
    assert list(log) == sorted(taken, key=lambda b: b.part)
    st.write(tmp_path, state, log.texts())
    by_objects = tmp_path / "objects"
    by_objects.mkdir()
    st.write(by_objects, state.with_batches(sorted(taken, key=lambda b: b.part)))
    assert (tmp_path / "_reuse.json").read_text(encoding="utf-8") == (by_objects / "_reuse.json").read_text(encoding="utf-8")


def test_read_keeps_where_each_batch_is_and_reads_its_inputs_and_rows_from_there(tmp_path):
    state = _state(5)
    st.write(tmp_path, state)
    back = st.read(tmp_path)
    assert all(isinstance(b.inputs, st.StoredInputs) and isinstance(b.rows, st.StoredRows) for b in back.batches)
    assert [(list(b.inputs), dict(b.rows), len(b.inputs)) for b in back.batches] == [
        ([{"path": f"p/{i}.jsonl", "size": 10 + i, "note": "ä \"q\""}], {"records": (i,)}, 1) for i in range(5)
    ]
    # the file changed under the run (by hand: a run holds the output's lock): said, not read as another batch
    path = tmp_path / "_reuse.json"
    path.write_text(" " * 40 + path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(OutputError, match="changed while this run read it"):
        list(back.batches[2].inputs)


def test_read_leaves_the_groups_fingerprints_in_the_file_and_tells_them_when_asked(tmp_path):
    """A re-run holds where each previous group's fingerprint is, not its text (`StoredGroups`)."""
    entries = {
        "owner-b": [["b/2.jsonl", 6, 8, "ab"], ["b/1.jsonl", 5, 7, None]],
        "owner-a": None,
        "owner-\u00e9": [["\u00e9.jsonl", 1, 2, None]],
    }
    # as the state holds them: the entries sorted by their JSON text, in one compact array
    texts = {o: None if e is None else json.dumps(sorted(e, key=json.dumps), separators=(",", ":")) for o, e in entries.items()}
    state = State("key", None, {}, {}, (Batch("p0", {"owner-z": [["z.jsonl", 1, 1, None]]}, (), (), {}),
                                        Batch("p1", entries, (), (), {"records": 3})), {}, None)
    st.write(tmp_path, state)
    back = st.read(tmp_path)
    groups = back.batches[1].groups
    assert isinstance(groups, st.StoredGroups) and list(groups) == sorted(entries) and len(groups) == 3
    assert groups["owner-a"] is None and "owner-b" in groups and "owner-z" not in groups
    assert {o: fingerprint_of(groups[o]) for o in groups} == texts
    assert groups["owner-b"] == texts["owner-b"] and groups["owner-b"] == groups["owner-b"]
    assert groups["owner-b"] != groups["owner-\u00e9"] and groups["owner-b"] != texts["owner-\u00e9"]
    assert list(fingerprint_texts([groups["owner-\u00e9"], "x", None, groups["owner-b"]])) == [
        texts["owner-\u00e9"], "x", None, texts["owner-b"]]
    assert back.batches == state.batches and pickle.loads(pickle.dumps(back.batches[1])) == state.batches[1]
    again = tmp_path / "again"
    again.mkdir()
    st.write(again, back)  # written again from where the texts are: the same state (its groups in owner order)
    assert json.loads((again / "_reuse.json").read_bytes()) == json.loads((tmp_path / "_reuse.json").read_bytes())
    # the file changed under the run (by hand: a run holds the output's lock): said, not read as another text
    path = tmp_path / "_reuse.json"
    path.write_text(" " * 40 + path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(OutputError, match="changed while this run read it"):
        fingerprint_of(groups["owner-b"])


@pytest.mark.parametrize("ascii_only", [True, False], ids=["escaped", "unescaped"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_a_state_file_laid_out_otherwise_reads_the_same(tmp_path, ascii_only, newline):
    """Spaces and line breaks between its members; characters beyond ASCII as they are (then each
    batch holds its inputs, as the file's offsets are not its characters')."""
    state = _state(4)
    text = json.dumps(state.to_json(), indent=2, ensure_ascii=ascii_only) + "\n\n"
    (tmp_path / "_reuse.json").write_bytes(text.replace("\n", newline).encode())
    back = st.read(tmp_path)
    assert back is not None and back.batches == state.batches and dict(back.heads.items()) == dict(state.heads)
    assert dict(back.reads.items()) == state.reads
    assert all(isinstance(b.inputs, st.StoredInputs) is ascii_only for b in back.batches)
    assert not any(isinstance(b.groups, st.StoredGroups) for b in back.batches)  # (held: not where `write` puts them)
    assert [list(b.inputs) for b in back.batches] == [list(b.inputs) for b in state.batches]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_read_a_few_characters_at_a_time_reads_the_same(tmp_path, monkeypatch, size):
    """Read in slices of `size` characters, every value and space is cut somewhere (a number too)."""
    state = _state(6)
    (tmp_path / "_reuse.json").write_text(json.dumps(state.to_json(), indent=1), encoding="utf-8")
    monkeypatch.setattr(st, "_READ", size)
    back = st.read(tmp_path)
    assert back is not None and back.batches == state.batches and dict(back.heads.items()) == dict(state.heads)
    assert dict(back.reads.items()) == state.reads
    assert [dict(b.rows) for b in back.batches] == [dict(b.rows) for b in state.batches]
    path = tmp_path / "_reuse.json"
    path.write_text(path.read_text(encoding="utf-8")[:-5], encoding="utf-8")  # truncated: not read
    assert st.read(tmp_path) is None


@pytest.mark.parametrize("damage", ["truncated", "more after it", "batches not an array", "a key not a string",
                                    "an array", "a batch not as written"])
def test_a_state_file_not_as_written_is_not_read(tmp_path, damage):
    state = _state(3)
    st.write(tmp_path, state)
    path = tmp_path / "_reuse.json"
    text, value = path.read_text(encoding="utf-8"), state.to_json()
    text = {
        "truncated": text[: len(text) // 2],
        "more after it": text + "{}",
        "batches not an array": json.dumps({**value, "batches": {"0": value["batches"][0]}}),
        "a key not a string": "{1:" + text[1:],
        "an array": json.dumps([value]),
        "a batch not as written": json.dumps({**value, "batches": [{**value["batches"][0], "groups": []}]}),
    }[damage]
    path.write_text(text, encoding="utf-8")
    assert st.read(tmp_path) is None


def test_the_reads_are_read_from_the_file_when_iterated_not_held(tmp_path):
    reads = {f"g{i:04d}": ["2026-12-06T00:00:00.000000Z" if i % 3 else None, bool(i % 2)] for i in range(9000)}
    st.write(tmp_path, State("key", None, {}, {}, (), reads, None))
    back = st.read(tmp_path)
    assert isinstance(back.reads, st.StoredItems) and back.reads.ordered and len(back.reads) == 9000
    assert list(back.reads_by_owner()) == list(reads.items())  # in the file's order, which is the owners'
    # written again from the file (an upgrade's state), the same text
    again = tmp_path / "again"
    again.mkdir()
    st.write(again, back)
    assert (again / "_reuse.json").read_text() == (tmp_path / "_reuse.json").read_text()
    # the file changed under the run: said, not read as other reads
    path = tmp_path / "_reuse.json"
    path.write_text(path.read_text().replace('"g0003"', '"g0003x"'))
    with pytest.raises(OutputError, match="changed while this run read it"):
        list(back.reads_by_owner())


def test_reads_out_of_owner_order_or_in_a_file_edited_by_hand_are_given_in_owner_order(tmp_path):
    reads = {"b": ["t2", True], "a": ["t1", False], "c": [None, True]}
    st.write(tmp_path, State("key", None, {}, {}, (), reads, None))
    back = st.read(tmp_path)
    assert isinstance(back.reads, st.StoredItems) and not back.reads.ordered
    assert list(back.reads_by_owner()) == [("a", ["t1", False]), ("b", ["t2", True]), ("c", [None, True])]
    # not ASCII (as `write` never writes it): offsets in characters are not in bytes, the reads are held
    path = tmp_path / "_reuse.json"
    path.write_text(path.read_text().replace('"b"', '"ä"'), encoding="utf-8")
    back = st.read(tmp_path)
    assert back.reads == {"ä": ["t2", True], "a": ["t1", False], "c": [None, True]}
    assert [owner for owner, _ in back.reads_by_owner()] == ["a", "c", "ä"]
