"""Places where the tables once said something the registry entry does not (issue: conform to the entry).

Small authored transcripts built here line by line; expected values are written by hand.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from conftest import SID, TEXT, assistant, envelope, run, tool_result, uid, usage, user, write_jsonl

MEMDIR = "/home/user/.claude/projects/-home-user-project/memory"


def rows(frame: pl.DataFrame, **where) -> list[dict]:
    return frame.filter(pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in where.items())).to_dicts()


# --------------------------------------------------------------------------- memory_saved op


def memory_saved(n: int, parent: str, *paths: str) -> dict:
    return envelope(
        "system", uid(n), parent, f"2026-09-16T08:00:{n:02d}.000Z", subtype="memory_saved",
        writtenPaths=list(paths), content="Saved memory", level="info",
    )


def test_memory_saved_is_an_add_the_first_time_a_path_is_written_and_an_update_after(src: Path, out: Path):
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "remember that I use tabs"),
        memory_saved(2, uid(1), f"{MEMDIR}/tabs.md"),
        user(uid(3), uid(2), "and two-space YAML"),
        memory_saved(4, uid(3), f"{MEMDIR}/tabs.md", f"{MEMDIR}/yaml.md"),
        # a Write of the memory file, then memory_saved naming it: written before, so an update
        assistant(uid(5), uid(4), "msg_01W", [{
            "type": "tool_use", "id": "toolu_01W", "name": "Write",
            "input": {"file_path": f"{MEMDIR}/style.md", "content": "x"},
        }], stop="tool_use"),
        tool_result(uid(6), uid(5), "toolu_01W", "File created", result={"type": "create", "filePath": f"{MEMDIR}/style.md"}),
        memory_saved(7, uid(6), f"{MEMDIR}/style.md"),
    ])
    t = run(src, out)
    saved = [(r["target_path"].rsplit("/", 1)[1], r["op"], r["position"])
             for r in rows(t["memory_changes"], evidence="memory_saved")]
    assert saved == [
        ("tabs.md", "add", "line:2"),
        ("tabs.md", "update", "line:4"),
        ("yaml.md", "add", "line:4"),
        ("style.md", "update", "line:7"),
    ]
    assert [r["op"] for r in rows(t["memory_changes"], evidence="tool_write")] == ["add"]


# --------------------------------------------------------------------------- numbers that fit no column


def test_a_count_that_fits_no_column_is_a_loss_naming_field_and_line(src: Path, out: Path):
    huge = usage(10**30)
    odd = usage(7, input_=1.5, cache_read="12")  # a float and a string: a cast would give 2 and 12
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01Big", [TEXT], stop="end_turn", usage_=huge),
        user(uid(3), uid(2), "again"),
        assistant(uid(4), uid(3), "msg_01Odd", [TEXT], stop="end_turn", usage_=odd),
    ])
    t = run(src, out)
    big = rows(t["inferences"], inference_id="msg_01Big")[0]
    assert (big["output_total_tokens"], big["input_uncached_tokens"]) == (None, 6)  # not reported, never a guess
    odd_row = rows(t["inferences"], inference_id="msg_01Odd")[0]
    assert (odd_row["input_uncached_tokens"], odd_row["cache_read_tokens"], odd_row["output_total_tokens"]) == (
        None, None, 7,
    )
    loss = rows(t["losses"], session_key=SID, category="number_not_mapped")
    assert len(loss) == 1 and loss[0]["count"] == 3
    detail = loss[0]["detail"]
    for field, value, line in (
        ("message.usage.output_tokens", str(10**30), 2), ("message.usage.input_tokens", "1.5", 4),
        ("message.usage.cache_read_input_tokens", '"12"', 4),
    ):
        assert f"{field}={value} at -home-user-project/{SID}.jsonl line:{line}" in detail, detail
    # the values stay in the record's native JSON
    native = rows(t["records"], record_id=f"{SID}:msg:msg_01Big")[0]["native"]
    assert '"output_tokens":1000000000000000000000000000000' in native
    assert t["rejects"].height == 0
