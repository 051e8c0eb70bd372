"""A legacy Codex rollout that `codex migrate-rollouts --apply` rewrote in place as paginated (same path,
new content, reference codex-format.md §14.5) is a replaced file on the next run: converted again
whole, never as grown, its earlier rows gone (tests/fixtures/codex/records, authored: no real migrated
file exists). Expected values are read from the two forms' lines with json.loads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

import batch
from conftest import FIXTURES, codex_responses, read_manifest, read_tables, rows

RECORDS = FIXTURES / "codex" / "records"
LEGACY = next((RECORDS / "legacy").glob("*.jsonl"))
MIGRATED = RECORDS / "migrated" / LEGACY.name
OTHER = FIXTURES / "codex" / "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"


def objects(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def first_turn(data: bytes) -> bytes:
    """The legacy rollout up to its second turn: without the turn it rolls back, its migrated form is
    larger than it (ordinals, item_completed lines), so only its first bytes tell it was rewritten."""
    lines = data.splitlines(keepends=True)
    second = [n for n, line in enumerate(lines) if json.loads(line)["type"] == "turn_context"][1]
    return b"".join(lines[:second])


@pytest.mark.parametrize("before", [LEGACY.read_bytes(), first_turn(LEGACY.read_bytes())], ids=["shorter", "longer"])
def test_a_migrated_rollout_is_replaced_and_read_again_whole(tmp_path: Path, before: bytes):
    src = tmp_path / "sessions"
    src.mkdir()
    path = src / LEGACY.name
    path.write_bytes(before)
    (src / OTHER.name).write_bytes(OTHER.read_bytes())  # an unchanged session beside it, in the same batch
    out = tmp_path / "out"
    batch.convert([src], out)
    thread = objects(before)[0]["payload"]["id"]
    old = read_tables(out)
    after = MIGRATED.read_bytes()
    assert after.startswith(b'{"timestamp"') and not after.startswith(before[:64])
    assert (len(after) > len(before)) == (before != LEGACY.read_bytes())
    path.write_bytes(after)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    batch.convert([src], out)

    manifest = read_manifest(out)
    shown = f"sessions/{LEGACY.name}"
    assert manifest["replaced"] == [{"path": shown, "reason": "rewritten", "lines_before": len(objects(before))}]
    assert manifest["reuse"]["session_groups_converted"] == 1
    assert "deltas" not in manifest["reuse"] or not manifest["reuse"]["deltas"].get("session_groups")
    t = read_tables(out)
    # every row of the session is of the migrated file: its lines, once each, none of the legacy form's left
    new = objects(after)
    lines = rows(t["source_lines"], source_file=shown).sort("line")
    assert lines["line"].to_list() == list(range(1, len(new) + 1))
    recs = rows(t["records"], session_key=thread)
    assert recs.height and set(recs["source_file"]) == {shown}
    for rec in recs.iter_rows(named=True):
        assert json.loads(rec["native"]) == new[rec["source_line"] - 1]
    assert recs.height == lines.filter(pl.col("status") == "mapped").height
    # its usage is the migrated file's (no records: the §9.6 rule); the rolled-back turn's is gone
    expected = codex_responses(new)
    inf = rows(t["inferences"], session_key=thread)
    assert inf.height == len(expected) and set(inf["usage_source"]) <= {"token_count"}
    assert inf["input_total_tokens"].sum() == sum(r["input_tokens"] for r in expected)
    assert inf["output_total_tokens"].sum() == sum(r["output_tokens"] for r in expected)
    dropped = len(codex_responses(objects(before))) - len(expected)
    assert rows(old["inferences"], session_key=thread).height - inf.height == dropped
    assert dropped == (1 if before == LEGACY.read_bytes() else 0)
    # the other session is as it was
    other = objects(OTHER.read_bytes())[0]["payload"]["id"]
    for name in ("records", "inferences", "source_lines"):
        assert rows(t[name], session_key=other).sort(pl.all()).equals(rows(old[name], session_key=other).sort(pl.all()))
