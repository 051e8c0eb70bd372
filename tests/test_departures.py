"""Places where the tables once said something the registry entry does not (issue: conform to the entry).

Small authored transcripts built here line by line; expected values are written by hand.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from conftest import SID, TEXT, assistant, envelope, run, tool_result, tool_use, uid, user, write_jsonl

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
