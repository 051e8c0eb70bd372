"""Hooks and compactions: the hooks and compactions tables, on authored fixtures and on the real corpus.

Authored fixtures (tests/fixtures/registry/hooks, see its README.md) do not qualify a Claude Code
version; the corpus tests do, for the versions their files were written by.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pytest

import batch
from batch.schema import TABLES
from conftest import CORPUS, FIXTURES, older, read_tables

REGISTRY = FIXTURES / "registry" / "hooks"

ATTACH_SID = "a1a1a1a1-0000-4000-8000-000000000001"
SYSTEM_SID = "b2b2b2b2-0000-4000-8000-000000000001"
COMPACT_SID = "c3c3c3c3-0000-4000-8000-000000000001"
EDITS_SID = "d4d4d4d4-0000-4000-8000-000000000001"
RCGRAY = "rcgray-claude-code-bug-phantom-reads-17407"

HOOK_ATTACHMENTS = {
    "hook_success", "hook_non_blocking_error", "hook_blocking_error", "hook_cancelled",
    "hook_error_during_execution", "async_hook_response",
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    out = tmp_path_factory.mktemp("hooks-registry") / "out"
    batch.convert([REGISTRY], out)
    return read_tables(out)


@pytest.fixture(scope="module")
def corpus(corpus_tables: Mapping[str, pl.DataFrame]) -> Mapping[str, pl.DataFrame]:
    return corpus_tables


def rows(frame: pl.DataFrame, session_key: str) -> list[dict]:
    return frame.filter(pl.col("session_key") == session_key).sort("seq", "hook_index").to_dicts()


def native_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def corpus_file(relative: str) -> Path:
    return CORPUS / relative


def with_source_file(hooks: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    return hooks.join(records.select("record_id", "source_file"), on="record_id", how="left")


# --------------------------------------------------------------------------- authored: attachments


def test_each_hook_attachment_type_gets_its_status(registry):
    got = {
        json.loads(r["native"])["attachment"]["type"]: r["status"]
        for r in rows(registry["hooks"], ATTACH_SID) if r["native_form"] == "attachment"
    }
    assert got == {
        "hook_success": "success",
        "hook_non_blocking_error": "non_blocking_error",
        "hook_blocking_error": "blocked",
        "hook_cancelled": "cancelled",
        "hook_error_during_execution": "error",
        "async_hook_response": "async_response",
    }


def test_hook_success_keeps_output_exit_code_command_and_duration(registry):
    first = rows(registry["hooks"], ATTACH_SID)[0]
    assert first["event"] == "session_start"
    assert first["native_event"] == "SessionStart"
    assert first["hook_name"] == "SessionStart:startup"
    assert first["command"] == "~/.claude/hooks/start.sh"
    assert first["stdout"].startswith('{"hookSpecificOutput"')
    assert first["stderr"] == ""
    assert first["exit_code"] == 0
    assert first["duration_ms"] == 240
    assert first["is_timed_out"] is None


def test_non_blocking_error_keeps_stderr_and_exit_code(registry):
    row = next(r for r in rows(registry["hooks"], ATTACH_SID)
               if r["status"] == "non_blocking_error" and r["event"] == "post_tool_use")
    assert row["stderr"] == "Failed with non-blocking status code: lint.sh: ruff not found"
    assert row["exit_code"] == 1
    assert row["duration_ms"] == 51
    assert row["command"] == "~/.claude/hooks/lint.sh"


def test_blocking_error_is_blocked_with_its_reason_and_command(registry):
    row = next(r for r in rows(registry["hooks"], ATTACH_SID) if r["status"] == "blocked")
    assert row["event"] == "pre_tool_use"
    assert row["blocking_error"] == "[~/.claude/hooks/guard.sh]: pytest must run with -x"
    assert row["command"] == "~/.claude/hooks/guard.sh"
    assert row["exit_code"] is None  # a blocking error records no exit code


def test_cancelled_hook_keeps_timed_out_and_timeout(registry):
    row = next(r for r in rows(registry["hooks"], ATTACH_SID) if r["status"] == "cancelled")
    assert row["is_timed_out"] is True
    assert row["timeout_ms"] == 60000
    assert row["duration_ms"] == 60003


def test_error_during_execution_keeps_the_error_text(registry):
    row = next(r for r in rows(registry["hooks"], ATTACH_SID) if r["status"] == "error")
    assert row["content"] == "Failed to run: spawn /usr/local/bin/notify ENOENT"
    assert row["command"] == "/usr/local/bin/notify"


def test_async_hook_response_keeps_the_response(registry):
    row = next(r for r in rows(registry["hooks"], ATTACH_SID) if r["status"] == "async_response")
    assert json.loads(row["response"]) == {"systemMessage": "coverage 91%"}
    assert row["exit_code"] == 0
    assert row["tool_use_id"] is None


def test_hooks_for_tool_events_link_to_the_tool_call(registry):
    hooks = rows(registry["hooks"], ATTACH_SID)
    linked = {r["call_id"] for r in hooks if r["event"] in ("pre_tool_use", "post_tool_use") and r["tool_use_id"]}
    assert linked == {"toolu_01HookAttachBash000001", "toolu_01HookAttachBash000002"}
    calls = set(registry["tool_calls"].filter(pl.col("session_key") == ATTACH_SID)["call_id"])
    assert linked <= calls
    # IDs minted for non-tool events name no call
    assert all(r["call_id"] is None for r in hooks if r["event"] in ("session_start", "user_prompt_submit", "stop"))


def test_stop_hook_summary_gives_one_row_per_hook_info_with_event_stop(registry):
    summary = [r for r in rows(registry["hooks"], ATTACH_SID) if r["native_form"] == "stop_hook_summary"]
    first = [r for r in summary if r["hook_count"] == 2]
    assert [(r["hook_index"], r["command"], r["duration_ms"]) for r in first] == [
        (0, "~/.claude/hooks/idle.sh", 80),
        (1, "~/.claude/hooks/report.sh", 1200),
    ]
    assert {r["event"] for r in summary} == {"stop"}
    assert {r["status"] for r in summary} == {"summarized"}
    assert all(r["native_event"] is None and r["hook_name"] is None for r in summary)
    assert json.loads(first[0]["hook_errors"]) == ["Failed with non-blocking status code: report server down"]
    assert first[0]["is_prevented_continuation"] is False
    assert first[0]["has_output"] is True


def test_stop_hook_summary_keeps_prevented_continuation_and_stop_reason(registry):
    gate = [
        r for r in rows(registry["hooks"], ATTACH_SID)
        if r["native_form"] == "stop_hook_summary" and r["hook_count"] == 1
    ]
    assert len(gate) == 1
    assert gate[0]["is_prevented_continuation"] is True
    assert gate[0]["stop_reason"] == "Release gate: CHANGELOG.md has no entry"
    assert gate[0]["duration_ms"] is None  # hookInfos entry without durationMs: not recorded, not 0
    assert json.loads(gate[0]["hook_errors"]) == []


def test_stop_hook_attachment_and_summary_entry_share_an_execution_key(registry):
    stop = [r for r in rows(registry["hooks"], ATTACH_SID) if r["event"] == "stop" and r["hook_count"] != 1]
    by_key: dict[str, set[str]] = {}
    for r in stop:
        by_key.setdefault(r["execution_key"], set()).add(r["native_form"])
    assert len(by_key) == 2
    assert all(forms == {"attachment", "stop_hook_summary"} for forms in by_key.values())


def test_hook_additional_context_is_a_hook_message_not_a_hook_row(registry):
    records = registry["records"].filter(
        (pl.col("session_key") == ATTACH_SID) & (pl.col("native_subtype") == "hook_additional_context")
    )
    assert records.height == 1
    record = records.row(0, named=True)
    assert (record["kind"], record["author"]) == ("message", "hook")
    assert json.loads(record["native"])["attachment"]["content"] == ["repo is clean"]
    assert record["record_id"] not in set(registry["hooks"]["record_id"])


def test_every_hook_record_has_a_hooks_row(registry):
    hook_records = set(registry["records"].filter(pl.col("kind") == "hook")["record_id"])
    assert hook_records == set(registry["hooks"]["record_id"])


# --------------------------------------------------------------------------- authored: 1.0.x system lines


def test_subtype_less_system_hook_lines_are_parsed(registry):
    got = [
        (r["status"], r["hook_name"], r["command"], r["stdout"], r["stderr"], r["exit_code"])
        for r in rows(registry["hooks"], SYSTEM_SID)
    ]
    assert got == [
        ("started", "PostToolUse:Edit", None, None, None, None),
        ("success", "PostToolUse:Edit", "ruff format app", "1 file reformatted", None, None),
        ("non_blocking_error", "PostToolUse:Edit", "mypy app", None,
         "app/x.py:3: error: Missing return statement", 1),
        ("error", "PostToolUse:Edit", "notify-send done", None, None, None),
        ("cancelled", "PostToolUse:Edit", "./slow-audit.sh", None, None, None),
        ("non_blocking_error", "PostToolUse:Edit", "./emit-json.sh", None, None, None),
        ("success", "Stop", "make check", None, None, None),
        (None, None, None, None, None, None),
    ]


def test_system_hook_lines_keep_plain_text_and_event(registry):
    hooks = rows(registry["hooks"], SYSTEM_SID)
    assert {r["native_form"] for r in hooks} == {"system"}
    assert hooks[0]["content"] == "Running PostToolUse:Edit..."
    assert "\x1b" not in "".join(r["content"] for r in hooks)
    assert [r["event"] for r in hooks[:7]] == ["post_tool_use"] * 6 + ["stop"]
    assert hooks[0]["call_id"] == "toolu_01SysHookEdit00000001"
    assert hooks[6]["call_id"] is None  # a Stop hook's toolUseID is minted, not a tool call


def test_unreadable_system_hook_line_keeps_null_status_and_its_text(registry):
    last = rows(registry["hooks"], SYSTEM_SID)[-1]
    assert last["status"] is None
    assert last["content"] == "Stop hooks finished (output truncated)"
    assert json.loads(last["native"])["content"] == "Stop hooks finished (output truncated)"


# --------------------------------------------------------------------------- authored: compactions


def compactions(frame: pl.DataFrame, session_key: str) -> list[dict]:
    return frame.filter(pl.col("session_key") == session_key).sort("seq", "edit_index", nulls_last=False).to_dicts()


def test_full_compaction_keeps_metadata_duration_and_summary(registry):
    first = compactions(registry["compactions"], COMPACT_SID)[0]
    assert first["compaction_kind"] == "full"
    metadata = (first["trigger"], first["pre_tokens"], first["post_tokens"], first["duration_ms"])
    assert metadata == ("auto", 171204, 12480, 28750)
    assert first["tokens_saved"] is None
    assert first["summary"].startswith("This session is being continued")
    assert first["summary"].endswith("Two SQL files were written.")
    assert first["replaces"] == "prefix"
    assert first["logical_parent_uuid"] == "c3c3c3c3-0000-4000-8000-000000000002"
    assert first["logical_parent_record_id"] == f"{COMPACT_SID}:msg:msg_01CompactResp00000001"
    assert json.loads(first["native"])["subtype"] == "compact_boundary"


def test_compact_summary_is_not_a_message(registry):
    summary_uuid = compactions(registry["compactions"], COMPACT_SID)[0]["summary_uuid"]
    assert summary_uuid == "c3c3c3c3-0000-4000-8000-000000000004"
    records = registry["records"].filter(pl.col("session_key") == COMPACT_SID)
    assert records.filter(pl.col("uuid") == summary_uuid).height == 0
    messages = records.filter(pl.col("kind") == "message")
    assert messages.height == 5  # 3 prompts and 2 responses; the summary line is part of the compaction


def test_boundary_without_summary_is_a_compaction_with_null_summary(registry):
    second = compactions(registry["compactions"], COMPACT_SID)[1]
    assert (second["compaction_kind"], second["trigger"], second["pre_tokens"]) == ("full", "manual", 40210)
    assert second["summary"] is None
    assert second["post_tokens"] is None and second["duration_ms"] is None


def test_applied_edits_become_one_prune_row_per_entry(registry):
    prunes = compactions(registry["compactions"], EDITS_SID)
    assert [(r["edit_index"], r["edit_type"], r["tokens_saved"], r["cleared_tool_uses"], r["cleared_thinking_turns"])
            for r in prunes] == [
        (0, "clear_tool_uses_20250919", 12000, 3, None),
        (1, "clear_thinking_20251015", 3100, None, 2),
    ]
    assert {r["compaction_kind"] for r in prunes} == {"prune"}
    assert {r["replaces"] for r in prunes} == {"unknown"}
    assert {r["record_id"] for r in prunes} == {f"{EDITS_SID}:msg:msg_01EditsResp000000002"}
    assert all(r["trigger"] is None and r["summary"] is None for r in prunes)
    assert json.loads(prunes[0]["metadata"]) == {
        "type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 12000,
    }


def test_null_and_empty_context_management_add_no_compaction(registry):
    record_ids = set(registry["compactions"].filter(pl.col("session_key") == EDITS_SID)["record_id"])
    assert f"{EDITS_SID}:msg:msg_01EditsResp000000001" not in record_ids  # context_management null
    assert f"{EDITS_SID}:msg:msg_01EditsResp000000003" not in record_ids  # applied_edits []


def test_every_compaction_record_has_a_compactions_row(registry):
    records = set(registry["records"].filter(pl.col("kind") == "compaction")["record_id"])
    full = registry["compactions"].filter(pl.col("compaction_kind") != "prune")
    assert records == set(full["record_id"])
    assert full.height == len(records)


def test_tables_are_empty_without_hooks_or_compactions(tmp_path):
    project = tmp_path / "projects" / "-home-user-plain"
    project.mkdir(parents=True)
    (project / "e5e5e5e5-0000-4000-8000-000000000001.jsonl").write_text(
        json.dumps({"type": "summary", "summary": "Nothing happened", "leafUuid": "e5e5e5e5-0000-4000-8000-000000000009"})
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    batch.convert([tmp_path / "projects"], out)
    tables = read_tables(out)
    assert tables["hooks"].height == 0
    assert tables["compactions"].height == 0
    assert tables["hooks"].columns == [t for t in TABLES if t.name == "hooks"][0].names


# --------------------------------------------------------------------------- real corpus: hooks


def expected_hook_rows(path: Path) -> int:
    """Hook rows a file should give, counted from its raw lines (one per distinct uuid)."""
    seen: dict[str, int] = {}
    for o in native_lines(path):
        n = 0
        if o.get("type") == "attachment" and o["attachment"].get("type") in HOOK_ATTACHMENTS:
            n = 1
        elif o.get("type") == "progress" and (o.get("data") or {}).get("type") == "hook_progress":
            n = 1
        elif o.get("type") == "system" and o.get("subtype") == "stop_hook_summary":
            n = max(len(o.get("hookInfos") or []), 1)
        elif o.get("type") == "system" and "subtype" not in o and o.get("toolUseID"):
            n = 1
        if n:
            seen[o.get("uuid") or str(len(seen))] = n
    return sum(seen.values())


def test_corpus_hook_rows_per_file_match_an_independent_count(corpus):
    hooks = with_source_file(corpus["hooks"], corpus["records"])
    counted = dict(hooks.group_by("source_file").len().iter_rows())
    expected_total = 0
    for path in sorted(CORPUS.rglob("*.jsonl")):
        expected = expected_hook_rows(path)
        expected_total += expected
        name = "corpus/" + path.relative_to(CORPUS).as_posix()
        assert counted.get(name, 0) == expected, name
    assert expected_total > 2700  # the corpus exercises every form


def test_corpus_2_1_114_hook_success_attachments(corpus):
    sid = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    hooks = corpus["hooks"].filter((pl.col("session_key") == sid) & (pl.col("native_form") == "attachment"))
    assert hooks.height == 45
    assert set(hooks["status"]) == {"success"}
    first = hooks.sort("seq").row(0, named=True)
    assert (first["event"], first["hook_name"], first["exit_code"], first["duration_ms"]) == (
        "session_start", "SessionStart:startup", 0, 1203)
    assert first["command"] == '"${CLAUDE_PLUGIN_ROOT}/scripts/clmail.cmd" actor started'
    assert first["stdout"].startswith('{"hookSpecificOutput"')
    post = hooks.filter(pl.col("event") == "post_tool_use")
    assert post.height == 40
    assert post["call_id"].null_count() == 0  # every PostToolUse hook names a tool call of the stream


def test_corpus_2_1_114_stop_hook_reported_twice_shares_the_execution_key(corpus):
    sid = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    stop = corpus["hooks"].filter((pl.col("session_key") == sid) & (pl.col("event") == "stop"))
    assert stop.height == 4
    per_key = stop.group_by("execution_key").agg(pl.col("native_form").sort(), pl.col("duration_ms").unique())
    assert per_key.height == 2
    assert per_key["native_form"].to_list() == [["attachment", "stop_hook_summary"]] * 2
    assert sorted(d for ds in per_key["duration_ms"].to_list() for d in ds) == [97, 102]


def test_corpus_2_1_114_hook_additional_context_is_a_hook_message(corpus):
    record = corpus["records"].filter(
        (pl.col("session_key") == "ef958aa1-0e93-49f0-bb71-150f63befcd1")
        & (pl.col("native_subtype") == "hook_additional_context")
    ).row(0, named=True)
    assert (record["kind"], record["author"], record["position"]) == ("message", "hook", "line:3")
    assert record["record_id"] not in set(corpus["hooks"]["record_id"])


def test_corpus_stop_hook_summaries_keep_each_hook_info(corpus):
    path = corpus_file("marot-spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    summaries = [o for o in native_lines(path) if o.get("subtype") == "stop_hook_summary"]
    hooks = corpus["hooks"].filter(
        (pl.col("session_key") == "258c7280-ae70-4798-800f-63464d01a85d")
        & (pl.col("native_form") == "stop_hook_summary")
    ).sort("seq", "hook_index")
    assert hooks["command"].to_list() == [h["command"] for o in summaries for h in o["hookInfos"]]
    assert hooks["hook_index"].to_list() == [0, 1, 2] * len(summaries)
    assert set(hooks["hook_count"]) == {3}
    assert hooks["duration_ms"].null_count() == hooks.height  # 2.1.39 hookInfos carry no durationMs
    assert set(hooks["is_prevented_continuation"]) == {False}


def test_corpus_hook_progress_lines_are_started_hooks(corpus):
    path = corpus_file("daaain-claude-code-log/-experiments-ideas/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl")
    progress = [o for o in native_lines(path) if o.get("type") == "progress" and o["data"]["type"] == "hook_progress"]
    hooks = corpus["hooks"].filter(
        (pl.col("session_key") == "03eb5929-52b3-4b13-ada3-b93ae35806b8") & (pl.col("native_form") == "progress")
    ).sort("seq")
    assert hooks.select("native_event", "hook_name", "command", "tool_use_id").rows() == [
        (o["data"]["hookEvent"], o["data"]["hookName"], o["data"]["command"], o["toolUseID"]) for o in progress
    ]
    assert set(hooks["status"]) == {"started"}
    first = hooks.row(0, named=True)
    assert (first["event"], first["position"]) == ("session_start", "line:2")


def test_corpus_hook_progress_events_cover_tool_failures(corpus):
    events = set(corpus["hooks"].filter(pl.col("native_form") == "progress")["event"])
    assert {"pre_tool_use", "post_tool_use", "post_tool_use_failure", "stop", "session_start"} <= events


def test_corpus_1_0_5x_system_hook_lines(corpus):
    hooks = with_source_file(corpus["hooks"], corpus["records"]).filter(pl.col("native_form") == "system")
    assert hooks.height == 18
    assert dict(hooks.group_by("status").len().iter_rows()) == {"started": 7, "success": 11}
    line = hooks.filter(
        pl.col("source_file").str.ends_with("71c9afe9-d9cc-4583-86b3-e62ba682b83a.jsonl")
        & (pl.col("status") == "success")
    ).row(0, named=True)
    assert (line["hook_name"], line["command"], line["stdout"]) == (
        "PostToolUse:Edit", "uv run ruff format", "1 file reformatted, 32 files left unchanged")
    assert line["call_id"] == "toolu_01EDwAuJ3XK3eSjRKFaP87QY"
    stops = hooks.filter(pl.col("event") == "stop")
    assert stops["command"].to_list() == [
        "bash -c 'echo \"=== PYRIGHT DEBUG ===\" >&2; uv run pyright 2>&1 | tee /dev/stderr; echo \"Exit code: $?\" >&2'",
        "uv run pytest 2>&1",
        "uv run ruff check --fix 2>&1",
        "uv run ty check 2>&1",
    ]
    assert stops["call_id"].null_count() == 4


# --------------------------------------------------------------------------- real corpus: compactions


@pytest.mark.parametrize(
    ("relative", "trigger", "pre_tokens"),
    [
        ("marot-spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl", "auto", 167094),
        ("marot-spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", "manual", 142431),
        ("oneryalcin-fasthooks/sample_main_transcript.jsonl", "manual", 21558),
    ],
)
def test_corpus_full_compaction_with_its_summary(corpus, relative, trigger, pre_tokens):
    lines = native_lines(corpus_file(relative))
    boundary = next(o for o in lines if o.get("subtype") == "compact_boundary")
    summary = next(o for o in lines if o.get("isCompactSummary"))
    row = corpus["compactions"].filter(
        pl.col("record_id") == f"{boundary['sessionId']}:{boundary['uuid']}"
    ).row(0, named=True)
    assert (row["compaction_kind"], row["trigger"], row["pre_tokens"]) == ("full", trigger, pre_tokens)
    assert row["summary"] == summary["message"]["content"]
    assert row["summary_uuid"] == summary["uuid"]
    assert row["logical_parent_uuid"] == boundary["logicalParentUuid"]
    assert row["logical_parent_record_id"] is not None
    assert row["duration_ms"] is None  # compactMetadata.durationMs is not written by these versions
    assert corpus["records"].filter(pl.col("uuid") == summary["uuid"]).height == 0


@pytest.mark.parametrize(
    "relative",
    [
        f"{RCGRAY}/schema-13-2120/20260129-202641/58c4ae0b-7366-4711-81c0-28442f46bf65.jsonl",
        f"{RCGRAY}/barebones-219/20260128-095954/b151f674-388c-48f0-9b04-0384f5a0bfb1.jsonl",
    ],
)
def test_corpus_microcompactions(corpus, relative):
    boundaries = [o for o in native_lines(corpus_file(relative)) if o.get("subtype") == "microcompact_boundary"]
    sid = boundaries[0]["sessionId"]
    got = corpus["compactions"].filter(pl.col("session_key") == sid).sort("seq")
    assert got.height == len(boundaries)
    for row, o in zip(got.iter_rows(named=True), boundaries, strict=True):
        meta = o["microcompactMetadata"]
        assert row["compaction_kind"] == "micro"
        got_meta = (row["trigger"], row["pre_tokens"], row["tokens_saved"])
        assert got_meta == (meta["trigger"], meta["preTokens"], meta["tokensSaved"])
        assert row["compacted_call_ids"] == meta["compactedToolIds"]
        assert row["cleared_tool_uses"] == len(meta["compactedToolIds"])
        assert row["cleared_attachment_uuids"] == []
        assert row["replaces"] == "tool_results"
        assert row["summary"] is None


def test_corpus_context_management_without_edits_adds_no_prune(corpus):
    # 2.0.42 writes {"applied_edits": []} once; 2.1.6/2.1.9 synthetic lines write null
    assert corpus["compactions"].filter(pl.col("compaction_kind") == "prune").height == 0
    assert older(corpus["compactions"]).height == 6
