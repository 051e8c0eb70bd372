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
from conftest import CORPUS, read_tables, timeless


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


def test_slices_change_no_row(corpus_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # a large batch runs in slices: its streams are read in slices of whole lines (formats/lines.py),
    # the slices gathered into chunks of pass 1 (each decoded, recovered and classified alone:
    # claude_code.pass1.decode), parts.sql run over slices of its records, and a part is
    # written a slice of its rows at a time. With slices of 4 KiB for the reads (thousands, and
    # lines longer than one), 512 KiB for the statements and 64 KiB for the writes, every file of
    # the corpus's output is the same, row for row and in order, with the same Parquet schema
    from batch import sql
    from batch.formats import lines
    from batch.formats.claude_code import pass1, pass2
    from batch.output import parts as output_parts

    monkeypatch.setattr(lines, "READ_SLICE_BYTES", 1 << 12)
    monkeypatch.setattr(pass1, "OBSERVE_SLICE_BYTES", 1 << 19)
    monkeypatch.setattr(pass2, "PART_SLICE_BYTES", 1 << 19)
    monkeypatch.setattr(output_parts, "WRITE_SLICE_BYTES", 1 << 16)
    calls = defaultdict(int)
    frame, split = sql.frame, lines._slice_lines

    def counted(con, name, *args, **kwargs):
        calls[name] += 1
        return frame(con, name, *args, **kwargs)

    def counted_split(*args):
        calls["read"] += 1
        return split(*args)

    recover = pass1.recover

    def counted_recover(*args):
        calls["chunk"] += 1  # once per chunk of pass 1
        return recover(*args)

    monkeypatch.setattr(sql, "frame", counted)
    monkeypatch.setattr(lines, "_slice_lines", counted_split)
    monkeypatch.setattr(pass1, "recover", counted_recover)
    out = tmp_path / "out"
    batch.convert([CORPUS], out)
    assert calls["read"] > 1000 and calls["observations"] > 10 and calls["parts"] > 10  # the slices were run
    # each chunk of pass 1 (up to 512 KiB of lines) went through pass 1 alone
    assert 10 < calls["chunk"] < calls["read"] / 10
    files = sorted(p.relative_to(corpus_out) for p in corpus_out.rglob("*.parquet"))
    assert files == sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    for name in files:
        assert_frame_equal(timeless(pl.read_parquet(out / name)), timeless(pl.read_parquet(corpus_out / name)), check_row_order=True)
        assert pq.read_schema(out / name).equals(pq.read_schema(corpus_out / name), check_metadata=True)
    # the writes were sliced: a part of records holds several row groups
    assert max(pq.ParquetFile(p).num_row_groups for p in (out / "records").glob("*.parquet")) > 1


def test_pass2_chunks_change_no_row(corpus_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # pass 2 of the core (records_full, parts, source_lines, number_faults, rejects) runs once per
    # chunk of a batch's observations (claude_code.pass2.chunk_ends). With chunks of 256 KiB of JSON text
    # (the corpus's sessions are up to 3 MiB: many chunks per session, records and lines cut apart
    # wherever allowed), every file of the corpus's output is the same, row for row and in order
    from batch import sql
    from batch.formats.claude_code import converter, narrow

    monkeypatch.setattr(converter, "PASS2_CHUNK_BYTES", 1 << 18)
    calls = defaultdict(int)
    frame, chunk_ends = sql.frame, narrow.chunk_ends
    chunks = []

    sessions_of_chunks = []

    def counted(con, name, *args, **kwargs):
        calls[name] += 1
        result = frame(con, name, *args, **kwargs)
        if name == "records_full":
            sessions_of_chunks.append(set(result.get_column("session_key")))
        return result

    def kept(*args):
        ends = chunk_ends(*args)
        chunks.append(ends)
        return ends

    monkeypatch.setattr(sql, "frame", counted)
    monkeypatch.setattr(narrow, "chunk_ends", kept)
    out = tmp_path / "out"
    batch.convert([CORPUS], out)
    # records_full, number_faults and source_lines ran once per chunk, more than 60 chunks in all
    count = sum(ends.len() for ends in chunks)
    assert count > 60 and calls["records_full"] == calls["number_faults"] == calls["source_lines_out"] == count
    assert calls["parts"] >= count
    # a session's records were made in several chunks: more than 5 for the largest sessions
    per_session = defaultdict(int)
    for sessions in sessions_of_chunks:
        for session in sessions:
            per_session[session] += 1
    assert max(per_session.values()) > 5
    files = sorted(p.relative_to(corpus_out) for p in corpus_out.rglob("*.parquet"))
    assert files == sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    for name in files:
        assert_frame_equal(timeless(pl.read_parquet(out / name)), timeless(pl.read_parquet(corpus_out / name)), check_row_order=True)
        assert pq.read_schema(out / name).equals(pq.read_schema(corpus_out / name), check_metadata=True)


def test_a_store_changes_no_row(corpus_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # a batch larger than STORE_BYTES keeps its wide rows in a store (claude_code/store.py): its decoded
    # observations, and its records, parts and source lines of each chunk of pass 2, go to Parquet
    # files as they are made, the statements read them as views, and the output tables are read back
    # a piece at a time (merged from the chunks' runs). With every batch stored, chunks of 256 KiB and
    # pieces of 64 KiB, every file of the corpus's output is the same, row for row and in order
    from batch.formats.claude_code import converter, store

    monkeypatch.setattr(converter, "STORE_BYTES", 0)
    monkeypatch.setattr(converter, "PASS2_CHUNK_BYTES", 1 << 18)
    monkeypatch.setattr(store, "MERGE_BYTES", 1 << 16)
    appended, folders = defaultdict(int), []
    append, init = store.Store.append, store.Store.__init__

    def counted(self, table, frame):
        appended[table] += 1
        return append(self, table, frame)

    def kept(self, con):
        init(self, con)
        folders.append(self.folder)

    monkeypatch.setattr(store.Store, "append", counted)
    monkeypatch.setattr(store.Store, "__init__", kept)
    out = tmp_path / "out"
    batch.convert([CORPUS], out)
    assert folders and appended["wide"] >= 1 and appended["records_pieces"] > 60 and appended["parts_pieces"] > 60
    assert not any(folder.exists() for folder in folders)  # each store's files are gone with it
    files = sorted(p.relative_to(corpus_out) for p in corpus_out.rglob("*.parquet"))
    assert files == sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    for name in files:
        assert_frame_equal(timeless(pl.read_parquet(out / name)), timeless(pl.read_parquet(corpus_out / name)), check_row_order=True)
        assert pq.read_schema(out / name).equals(pq.read_schema(corpus_out / name), check_metadata=True)


def test_narrow_stage_reads_no_wide_column_and_indexes_as_the_whole_observations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # observation_index reads the narrow frame of pass 1 (claude_code.pass1.NARROW_COLUMNS and ord): no
    # JSON text, content or line text. Over the corpus (inline sidechains and agent_progress-rebuilt
    # subagents included), the index it gives equals the index the same statement gives over the
    # whole classified observations, row by row
    from batch import sql
    from batch.formats.claude_code.pass1 import NARROW_COLUMNS

    wide = {"json", "content", "top_content", "tool_use_result", "text", "raw", "text_head"}
    assert not wide & set(NARROW_COLUMNS)
    materialize = sql.materialize
    seen: list[pl.DataFrame] = []

    def checked(con, name, *args, **kwargs):
        if name == "observation_index":
            narrow = con.table("narrow_observations").pl()
            assert narrow.columns == [*NARROW_COLUMNS, "ord"]
            from_narrow = sql.frame(con, "observation_index").sort("ord")
            con.unregister("narrow_observations")
            sql.register(con, "narrow_observations", con.table("classified").pl())
            from_whole = sql.frame(con, "observation_index").sort("ord")
            sql.register(con, "narrow_observations", narrow)
            assert from_whole.height == con.table("classified").pl().height > 0
            assert_frame_equal(from_narrow, from_whole, check_row_order=True)
            seen.append(narrow)
        return materialize(con, name, *args, **kwargs)

    monkeypatch.setattr(sql, "materialize", checked)
    batch.convert([CORPUS], tmp_path / "out")
    narrow = pl.concat(seen)
    assert (narrow.get_column("stream_kind") == "sidechain").any()  # split in the narrow frame
    assert narrow.get_column("position").str.starts_with("agent_progress:").any()  # rebuilt objects' narrow rows


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
