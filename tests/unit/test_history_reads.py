"""When each group's source was last read, merged from the previous reuse state an entry at a time
(batch/incremental/history.py `reads`, `found_the_same`)."""

from __future__ import annotations

import pytest

from batch.incremental import history
from batch.incremental import state as st
from batch.incremental.state import State

NOW = "2026-12-07T12:00:00.000000Z"
BEFORE = {"a": ["t1", True], "b": ["t2", True], "c": [None, False], "d": ["t4", True], "g": ["t7", True]}


@pytest.fixture(params=["held", "from the file"])
def previous(request, tmp_path) -> State:
    state = State("key", None, {}, {}, (), BEFORE, None)
    if request.param == "held":
        return state
    st.write(tmp_path, state)
    back = st.read(tmp_path)
    assert isinstance(back.reads, st.StoredItems)
    return back


def test_each_group_keeps_its_last_read_unless_converted_now_and_is_found_unless_kept_or_carried(previous):
    got = list(history.reads(previous, ["b", "a", "e"], {"b", "e"}, frozenset({"c"}), NOW, {"f": None, "d": "t9"}))
    assert got == [
        ("a", ["t1", True]),  # reused: the time the state records
        ("b", [NOW, True]),  # converted now
        ("c", [None, False]),  # kept: its source gone, its time as recorded
        ("d", ["t9", False]),  # rebuilt from an earlier output: when that output's run read it
        ("e", [NOW, True]),  # new
        ("f", [None, False]),  # rebuilt, its time not known
    ]  # g: in no output any more


def test_a_first_run_reads_every_group_now():
    assert list(history.reads(None, {"y": 1, "x": 2}, {"x", "y"}, frozenset(), NOW)) == [("x", [NOW, True]), ("y", [NOW, True])]


def test_the_groups_found_by_the_previous_run_are_compared_in_owner_order(previous):
    assert history.found_the_same(previous, {"g", "d", "b", "a"})
    assert not history.found_the_same(previous, {"a", "b", "d"})  # g not found now
    assert not history.found_the_same(previous, {"a", "b", "c", "d", "g"})  # c was not found then
    assert not history.found_the_same(previous, {"a", "b", "d", "g", "h"})
    assert not history.found_the_same(None, set())
