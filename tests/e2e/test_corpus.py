"""End to end over the real corpus: nothing lost, usage equals an independent count, reruns identical."""

from __future__ import annotations

import json
from collections.abc import Mapping
from collections import defaultdict
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

import batch
from conftest import CORPUS, read_tables, sorted_rows, timeless


@pytest.fixture(scope="module")
def converted(corpus_out: Path, corpus_tables: Mapping[str, pl.DataFrame]) -> tuple[Path, Mapping[str, pl.DataFrame]]:
    return corpus_out, corpus_tables


def corpus_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.jsonl"))


def test_every_file_is_an_input(converted):
    out, _ = converted
    manifest = json.loads((out / "manifest.json").read_text())
    statuses = {i["path"]: i["status"] for i in manifest["inputs"]}
    assert len(statuses) == len(corpus_files())
    assert set(statuses.values()) <= {"converted", "empty"}
    assert manifest["rejected_lines"] == 0


def test_source_lines_match_non_blank_lines_per_file(converted):
    _, t = converted
    counted = dict(t["source_lines"].group_by("source_file").len().iter_rows())
    for path in corpus_files():
        name = "corpus/" + path.relative_to(CORPUS).as_posix()
        expected = sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
        assert counted.get(name, 0) == expected, name


def test_every_line_lands_in_a_record(converted):
    _, t = converted
    lines = t["source_lines"]
    assert lines.filter(pl.col("status").is_in(["mapped", "folded", "duplicate"]).not_()).height == 0
    missing = lines.join(t["records"], on="record_id", how="anti")
    assert missing.height == 0
    # one mapped line per record read from a transcript: its JSON is the record's native
    from_files = t["records"].filter(pl.col("record_source") == "transcript")
    assert lines.filter(pl.col("status") == "mapped").height == from_files.height
    # a record rebuilt from agent_progress copies is linked from the progress line it came from
    rebuilt = t["records"].filter(pl.col("record_source") == "agent_progress")
    assert rebuilt.height > 0
    linked = t["records"].get_column("copy_of_record_id").drop_nulls().unique()
    assert rebuilt.join(linked.to_frame("record_id"), on="record_id", how="anti").height == 0


def test_keys_are_unique(converted):
    _, t = converted
    assert t["records"].get_column("record_id").is_duplicated().sum() == 0
    assert t["sessions"].get_column("session_key").is_duplicated().sum() == 0
    assert t["inferences"].get_column("inference_id").is_duplicated().sum() == 0
    assert t["parts"].select("record_id", "part_index").is_duplicated().sum() == 0
    assert t["tool_calls"].select("session_key", "call_id").is_duplicated().sum() == 0


def _assistant_lines(path: Path, agent_files: set[str]):
    """Yield (where, line object) for the assistant lines of a file, and for the subagent messages
    its agent_progress lines embed when that subagent's own file is absent."""
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        obj = json.loads(raw)
        data = obj.get("data") or {}
        if data.get("type") == "agent_progress" and data.get("agentId") not in agent_files:
            yield f"progress:{data.get('agentId')}", data.get("message") or {}
        else:
            yield str(path), obj


def _independent_usage() -> dict[str, dict]:
    """Per inference: usage of the latest line of each file, then the one with a stop reason
    (else the largest output) across files, computed line by line without the converter."""
    per_file: dict[tuple[str, str], dict] = {}
    agent_files = {p.name[len("agent-"):-len(".jsonl")] for p in corpus_files() if p.name.startswith("agent-")}
    for path in corpus_files():
        for where, obj in _assistant_lines(path, agent_files):
            message = obj.get("message") or {}
            if obj.get("type") != "assistant" or not message.get("id"):
                continue
            if message.get("model") == "<synthetic>" or obj.get("isApiErrorMessage"):
                continue
            usage = message.get("usage") or {}
            per_file[(where, message["id"])] = {
                "stop": message.get("stop_reason"),
                "input": usage.get("input_tokens"),
                "output": usage.get("output_tokens"),
                "cache_read": usage.get("cache_read_input_tokens"),
                "cache_write": usage.get("cache_creation_input_tokens"),
            }
    grouped: dict[str, list[dict]] = defaultdict(list)
    for (_, message_id), usage in per_file.items():
        grouped[message_id].append(usage)
    return {
        mid: max(obs, key=lambda u: (u["stop"] is not None, u["output"] or -1))
        for mid, obs in grouped.items()
    }


def test_inferences_match_an_independent_count(converted):
    _, t = converted
    expected = _independent_usage()
    inferences = t["inferences"]
    assert inferences.height == len(expected)
    totals = inferences.select(
        pl.col("input_uncached_tokens").sum(),
        pl.col("output_total_tokens").sum(),
        pl.col("cache_read_tokens").sum(),
        pl.col("cache_write_tokens").sum(),
    ).row(0)
    assert totals == (
        sum(u["input"] or 0 for u in expected.values()),
        sum(u["output"] or 0 for u in expected.values()),
        sum(u["cache_read"] or 0 for u in expected.values()),
        sum(u["cache_write"] or 0 for u in expected.values()),
    )
    complete = inferences.get_column("usage_complete").sum()
    assert complete == sum(1 for u in expected.values() if u["stop"] is not None)


def test_one_selected_observation_per_inference(converted):
    _, t = converted
    selected = t["inference_observations"].filter("is_selected")
    assert selected.height == t["inferences"].height
    assert selected.get_column("inference_id").n_unique() == selected.height


def test_subagents_of_every_layout_are_streams(converted):
    _, t = converted
    kinds = dict(t["sessions"].group_by("stream_kind").len().iter_rows())
    assert kinds["sidechain"] == 2  # the two inline Task runs of the 1.0.108 transcript
    assert kinds["subagent"] >= 20
    spawned = t["lineage"].filter(pl.col("scope") == "subagent")
    assert spawned.filter(pl.col("parent_session_key").is_null()).height == 0
    assert "ef958aa1-0e93-49f0-bb71-150f63befcd1/a4ca7529859c158c2" in spawned.get_column("session_key").to_list()


def test_rerun_gives_identical_tables(converted, tmp_path):
    _, first = converted
    out = tmp_path / "again"
    batch.convert([CORPUS], out, batch_bytes=2 << 20)
    second = read_tables(out)
    for name, frame in first.items():
        keys = [c for c in frame.columns if frame.schema[c] != pl.List(pl.String)]
        assert_frame_equal(timeless(frame.sort(keys)), timeless(second[name].sort(keys)), check_row_order=True)


def test_real_evidence_versions_are_the_corpus_versions(converted):
    out, _ = converted
    manifest = json.loads((out / "manifest.json").read_text())
    coverage = manifest["export_report"]["coverage"]
    assert coverage["versions_in_input"] == coverage["real_evidence_versions"]


def test_unassigned_summaries_are_not_titles(converted):
    out, t = converted
    unassigned = json.loads((out / "manifest.json").read_text())["_meta"]["com.anthropic.claude-code/unassigned"]
    assert unassigned, "the corpus has summaries of other sessions' leaves"
    title_records = set(t["session_events"].filter(pl.col("field") == "title").get_column("record_id").to_list())
    # each unassigned fact names a leaf that is not a uuid of the stream holding its line
    by_position = t["records"].select("source_file", "position", "session_key")
    uuids = t["records"].select("session_key", "uuid").drop_nulls()
    for fact in unassigned[:50]:
        row = by_position.filter(
            (pl.col("source_file") == fact["source"]["path"]) & (pl.col("position") == fact["source"]["position"])
        )
        key = row.get_column("session_key").item()
        record = t["records"].filter(
            (pl.col("source_file") == fact["source"]["path"]) & (pl.col("position") == fact["source"]["position"])
        ).get_column("record_id").item()
        assert record not in title_records
        leaf = fact["references"]["leafUuid"]
        assert uuids.filter((pl.col("session_key") == key) & (pl.col("uuid") == leaf)).height == 0


# Markers of the registry items the manifest lists as unqualified: no real transcript may hold one.
UNQUALIFIED_MARKERS = {
    "turnOrigin": ['"turnOrigin"'],
    "scheduledTaskId, scheduledFireId, fireReason": ['"scheduledTaskId"', '"scheduledFireId"', '"fireReason"'],
    "permissionDecision": ['"permissionDecision"'],
    "toolDenialKind": ['"toolDenialKind"'],
    "api-request and requestDigest": ['"type":"api-request"', '"requestDigest"'],
    "cost-state": ['"type":"cost-state"'],
    "environment attachment": ['"type":"environment"'],
    "memory_saved and memdirStamped": ['"memory_saved"', '"memdirStamped"'],
    "custom-title": ['"type":"custom-title"'],
    "forkedFrom, fork-context-ref, continued-in": ['"forkedFrom"', '"type":"fork-context-ref"', '"type":"continued-in"'],
    "origin.kind peer, coordinator, observer, channel": [
        '"kind":"peer"', '"kind":"coordinator"', '"kind":"observer"', '"kind":"channel"'],
    "file-history-delta": ['"type":"file-history-delta"'],
    "bridge-session": ['"type":"bridge-session"'],
    "sidecar toolUseId (spawnedBy native_field, launch prompt author agent)": ['"toolUseId"'],
    "Monitor, background Agent": ['"name":"Monitor"', '"name":"Agent","input":{"run_in_background":true'],
}


def test_unqualified_items_have_no_real_line_and_qualified_ones_name_real_versions(converted):
    out, _ = converted
    coverage = json.loads((out / "manifest.json").read_text())["export_report"]["coverage"]
    # the seven items the registry names for after 2.1.218 are among them
    for item in ("turnOrigin", "permissionDecision", "toolDenialKind", "cost-state", "environment attachment"):
        assert item in coverage["unqualified_items"]
    assert any("api-request" in i for i in coverage["unqualified_items"])
    assert any("scheduledTaskId" in i for i in coverage["unqualified_items"])
    assert set(coverage["unqualified_items"]) == set(UNQUALIFIED_MARKERS)
    files = sorted(CORPUS.rglob("*.jsonl")) + sorted(CORPUS.rglob("*.meta.json"))
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace").replace('": ', '":')
        for item, markers in UNQUALIFIED_MARKERS.items():
            for marker in markers:
                assert marker not in text, (item, marker, path)
    real = set(coverage["real_evidence_versions"])
    for item, versions in coverage["real_evidence_by_item"].items():
        named = versions.split(" ")[0].split("-")
        assert set(named) <= real, (item, versions)


def assert_same_files(out: Path, want: Path) -> None:
    """Every Parquet file of `want` is in `out`, the same row for row and in order, with the same schema."""
    files = sorted(p.relative_to(want) for p in want.rglob("*.parquet"))
    assert files == sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    for name in files:
        assert_frame_equal(timeless(pl.read_parquet(out / name)), timeless(pl.read_parquet(want / name)), check_row_order=True)
        assert pq.read_schema(out / name).equals(pq.read_schema(want / name), check_metadata=True)


def test_slices_change_no_row(corpus_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # a batch's streams are read in slices of whole lines (formats/lines.py), each handed to DuckDB
    # alone, and its tables are written a slice of Arrow rows at a time (run/task.py). With slices of
    # 4 KiB for the reads (thousands, and lines longer than one), 64 KiB and 256 rows for the writes,
    # every file of the corpus's output is the same, row for row and in order, with the same schema
    from batch.formats import lines
    from batch.run import task

    monkeypatch.setattr(lines, "READ_SLICE_BYTES", 1 << 12)
    monkeypatch.setattr(task, "RELATION_SLICE_BYTES", 1 << 16)
    monkeypatch.setattr(task, "RELATION_BATCH_ROWS", 256)
    calls = defaultdict(int)
    split = lines._slice_lines

    def counted_split(*args):
        calls["read"] += 1
        return split(*args)

    monkeypatch.setattr(lines, "_slice_lines", counted_split)
    out = tmp_path / "out"
    batch.convert([CORPUS], out)
    assert calls["read"] > 1000  # the slices were read
    assert_same_files(out, corpus_out)
    # the writes were sliced: a part of records holds several row groups
    assert max(pq.ParquetFile(p).num_row_groups for p in (out / "records").glob("*.parquet")) > 1


def test_a_large_batch_runs_within_its_memory_limit_and_changes_no_row(
    corpus_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # a batch larger than LARGE_BATCH_BYTES runs within DuckDB's limit LARGE_BATCH_MEMORY, beyond
    # which its tables spill to the run folder. With every batch large and a limit of 128 MiB for one
    # batch of the whole corpus (whose tables hold more than twice that), every table holds the
    # same rows, and the spilled files are gone
    from batch import sql
    from batch.formats.claude_code import converter

    monkeypatch.setattr(converter, "LARGE_BATCH_BYTES", -1)  # an empty file's batch too
    monkeypatch.setattr(converter, "LARGE_BATCH_MEMORY", 128 << 20)
    materialize, limits = sql.materialize, set()

    def seen(con, name, *args, **kwargs):
        if name in ("observation_index", "records_full", "parts", "hooks"):  # the Claude Code converter's
            limits.add(con.sql("select current_setting('memory_limit')").fetchall()[0][0])
        return materialize(con, name, *args, **kwargs)

    monkeypatch.setattr(sql, "materialize", seen)
    out = tmp_path / "out"
    result = batch.convert([CORPUS], out, batch_bytes=256 << 20, workers=1)
    assert limits == {"128.0 MiB"} and "session_groups_not_converted" not in result.manifest["reuse"]
    got, want = read_tables(out), read_tables(corpus_out)
    for name in want:
        assert_frame_equal(sorted_rows(timeless(got[name])), sorted_rows(timeless(want[name])), check_row_order=True)
    assert not list(tmp_path.glob(".*asr-run*"))


def test_each_table_is_written_once_no_later_statement_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # the converter writes each table as soon as no statement still to run reads it, and drops the
    # tables no statement still to run reads: the order of the statements run and the tables written
    from batch import sql
    from batch.formats.claude_code import converter
    from batch.run import task

    events: list[tuple[str, str]] = []
    materialize, add_relation = sql.materialize, task.BatchParts.add_relation

    def ran(con, name, *args, **kwargs):
        events.append(("run", name))
        return materialize(con, name, *args, **kwargs)

    def written(self, con, name, relation, *args, **kwargs):
        events.append(("write", relation))
        return add_relation(self, con, name, relation, *args, **kwargs)

    monkeypatch.setattr(sql, "materialize", ran)
    monkeypatch.setattr(task.BatchParts, "add_relation", written)
    batch.convert([CORPUS], tmp_path / "out", batch_bytes=256 << 20, workers=1)
    # each batch's events, from its first statement on; the final stage's statements left out
    starts = [i for i, event in enumerate(events) if event == ("run", "sidechain_roots")]
    assert starts
    for start, end in zip(starts, [*starts[1:], len(events)]):
        batch_events = [(k, n) for k, n in events[start:end] if k == "write" or sql.files()[n].parent.name == "batch"]
        writes = [i for i, (kind, _) in enumerate(batch_events) if kind == "write"]
        assert len({batch_events[i][1] for i in writes}) == len(writes)  # each once
        for i in writes:
            held = set(converter._VIEWS.get(batch_events[i][1], (batch_events[i][1],)))
            for kind, name in batch_events[i + 1:]:
                read = {t for r in sql.reads(name) for t in converter._VIEWS.get(r, (r,))} if kind == "run" else set()
                assert not held & read, (batch_events[i][1], name)
    # the largest batch: every table written, not all at the end
    largest = max(zip(starts, [*starts[1:], len(events)]), key=lambda r: r[1] - r[0])
    written = [n for k, n in events[largest[0]:largest[1]] if k == "write"]
    assert len(written) > 20 and {"records_full", "batch_parts", "session_events"} <= set(written)
    ran = [i for i, (k, n) in enumerate(events[largest[0]:largest[1]]) if k == "run"]
    assert min(i for i, (k, _) in enumerate(events[largest[0]:largest[1]]) if k == "write") < max(ran)


def test_lineage_evidence_is_in_its_declared_order(corpus_out: Path):
    # its rows do not follow how DuckDB happened to scan batch_parts: sorted by the order its file
    # declares, which tells every row apart (the same rows in the same order whatever the run)
    from batch import sql

    key = sql.sorted_by("lineage_evidence")
    assert key
    parts = sorted((corpus_out / "_work" / "lineage_evidence").glob("*.parquet"))
    assert parts
    for path in parts:
        frame = pl.read_parquet(path)
        assert frame.height > 1
        assert not frame.select(key).is_duplicated().any()
        assert_frame_equal(frame, frame.sort(key, nulls_last=True), check_row_order=True)
