"""Places where the tables once said something the registry entry does not (issue: conform to the entry).

Small authored transcripts built here line by line; expected values are written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from conftest import SID, TEXT, assistant, envelope, run, tool_result, uid, usage, user, write_jsonl
from conftest import rows as matching

MEMDIR = "/home/user/.claude/projects/-home-user-project/memory"


def rows(frame: pl.DataFrame, **where) -> list[dict]:
    return matching(frame, **where).to_dicts()


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


# --------------------------------------------------------------------------- subagent launch prompt


def _subagent(src: Path, agent: str, first_prompt: str, sidecar: dict) -> None:
    folder = src / SID / "subagents"
    write_jsonl(folder / f"agent-{agent}.jsonl", [
        user(f"{agent}-0000-4000-8000-000000000001", None, first_prompt, isSidechain=True, agentId=agent),
        assistant(f"{agent}-0000-4000-8000-000000000002", f"{agent}-0000-4000-8000-000000000001", f"msg_01{agent}",
                  [TEXT], stop="end_turn", isSidechain=True, agentId=agent),
    ])
    (folder / f"agent-{agent}.meta.json").write_text(json.dumps(sidecar))


def _agent_call(n: int, parent: str, call_id: str, prompt: str) -> dict:
    return assistant(uid(n), parent, f"msg_01Call{n}", [{
        "type": "tool_use", "id": call_id, "name": "Agent",
        "input": {"description": prompt, "prompt": prompt, "subagent_type": "Explore"},
    }], stop="tool_use")


def _agent_result(n: int, parent: str, call_id: str, agent: str) -> dict:
    return tool_result(uid(n), parent, call_id, "done", result={
        "status": "completed", "agentId": agent, "agentType": "Explore", "content": [{"type": "text", "text": "done"}],
    })


def test_launch_prompt_and_native_lineage_need_the_sidecar_and_the_result_naming_one_call(src: Path, out: Path):
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "survey"),
        _agent_call(2, uid(1), "toolu_01Both", "survey tests"),
        _agent_result(3, uid(2), "toolu_01Both", "aaaa0001"),
        _agent_call(4, uid(3), "toolu_01Other", "survey ci"),
        _agent_result(5, uid(4), "toolu_01Other", "aaaa0002"),
    ])
    # both fields name toolu_01Both: the entry's evidence
    _subagent(src, "aaaa0001", "survey tests", {"agentType": "Explore", "toolUseId": "toolu_01Both"})
    # the sidecar names a call the result naming this agent does not answer: they disagree
    _subagent(src, "aaaa0002", "survey ci", {"agentType": "Explore", "toolUseId": "toolu_01Elsewhere"})
    t = run(src, out)

    def first_prompt(agent: str) -> tuple:
        r = rows(t["records"], session_key=f"{SID}/{agent}", seq=1)[0]
        return r["author"], r["origin"]

    def edge(agent: str) -> tuple:
        r = rows(t["lineage"], session_key=f"{SID}/{agent}", relation="spawned_by")[0]
        return r["call_id"], r["evidence"], r["evidence_detail"], r["parent_session_key"]

    assert first_prompt("aaaa0001") == ("agent", "prompt")
    assert edge("aaaa0001") == ("toolu_01Both", "native_field", "sidecar.toolUseId,tool_result.agentId", SID)
    assert rows(t["losses"], session_key=f"{SID}/aaaa0001", category="lineage") == []
    assert first_prompt("aaaa0002") == (None, None)
    # either way the launch prompt names the subagent stream (its first prompt)
    assert [rows(t["sessions"], session_key=f"{SID}/{agent}")[0]["first_prompt"] for agent in ("aaaa0001", "aaaa0002")] \
        == ["survey tests", "survey ci"]
    assert edge("aaaa0002")[1] == "native_field_partial"
    assert "native_field_partial" in rows(t["losses"], session_key=f"{SID}/aaaa0002", category="lineage")[0]["detail"]


def test_lineage_resting_on_progress_lines_only_says_so_and_is_declared_lost(src: Path, out: Path):
    # the Agent call has no result in this capture: only agent_progress lines name the agent
    progress = envelope(
        "progress", uid(3), uid(2), "2026-09-16T08:00:03.000Z",
        data={
            "type": "agent_progress", "agentId": "bbbb0001", "prompt": "look around",
            "message": {"type": "user", "uuid": "bbbb0001-0000-4000-8000-000000000001",
                        "timestamp": "2026-09-16T08:00:03.000Z",
                        "message": {"role": "user", "content": [{"type": "text", "text": "look around"}]}},
        },
        toolUseID="agent_msg_01", parentToolUseID="toolu_01Pending",
    )
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "look around"),
        _agent_call(2, uid(1), "toolu_01Pending", "look around"),
        progress,
    ])
    t = run(src, out)
    key = f"{SID}/bbbb0001"
    edge = rows(t["lineage"], session_key=key, relation="spawned_by")[0]
    assert (edge["call_id"], edge["evidence"], edge["evidence_detail"]) == ("toolu_01Pending", "progress_field", "progress.agentId")
    assert "progress_field" in rows(t["losses"], session_key=key, category="lineage")[0]["detail"]
    assert rows(t["records"], session_key=key, seq=1)[0]["author"] is None


# --------------------------------------------------------------------------- accounting join


def test_usage_summaries_declare_the_accounting_join_loss(src: Path, out: Path):
    cost = {
        "type": "cost-state", "sessionId": SID, "totalCostUSD": 0.12, "totalDuration": 812,
        "modelUsage": {"claude-opus-4-6": {"inputTokens": 6, "outputTokens": 3, "cacheReadInputTokens": 50,
                                           "cacheCreationInputTokens": 100, "costUSD": 0.12}},
    }
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn"),
        cost,
        cost,  # written again: a second summary record
    ])
    t = run(src, out)
    assert len(rows(t["usage_summaries"], session_key=SID)) == 2
    loss = rows(t["losses"], session_key=SID, category="accounting_join")
    assert [r["count"] for r in loss] == [2]  # one loss row per stream, counting its summaries
    assert "not joined to the inferences" in loss[0]["detail"]


# --------------------------------------------------------------------------- kinds the entry does not name


def test_bridge_session_is_an_unknown_kind_kept_whole_and_folded_when_repeated(src: Path, out: Path):
    bridge = {"type": "bridge-session", "sessionId": SID, "bridgeSessionId": "br_01", "url": "https://example.test/b"}
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello"), bridge, bridge])
    t = run(src, out)
    kept = rows(t["records"], native_type="bridge-session")
    assert [(r["kind"], r["position"]) for r in kept] == [("unknown", "line:2")]
    assert json.loads(kept[0]["native"]) == bridge
    # written again unchanged: metadata repeated at each exit, not a new record
    line3 = rows(t["source_lines"], line=3)[0]
    assert (line3["status"], line3["reason"], line3["record_id"]) == ("duplicate", "unchanged_value", kept[0]["record_id"])
    assert rows(t["session_events"], session_key=SID, native_type="bridge-session") == []



def assert_numbers_not_mapped(t: dict, values: list[tuple[str, int]]) -> None:
    """SID's one number_not_mapped loss counts the values and names each (`field=JSON`, line)."""
    loss = rows(t["losses"], session_key=SID, category="number_not_mapped")[0]
    assert loss["count"] == len(values)
    for value, line in values:
        fragment = f"{value} at -home-user-project/{SID}.jsonl line:{line}"
        assert fragment in loss["detail"], (fragment, loss["detail"])


def test_other_counts_that_fit_no_column_are_declared_too(src: Path, out: Path):
    boundary = envelope(
        "system", uid(3), None, "2026-09-16T08:00:03.000Z", subtype="compact_boundary", content="Conversation compacted",
        logicalParentUuid=uid(2), compactMetadata={"trigger": "manual", "preTokens": 1.5, "postTokens": 900},
    )
    hook = envelope(
        "attachment", uid(4), uid(3), "2026-09-16T08:00:04.000Z",
        attachment={"type": "hook_success", "hookName": "Stop", "hookEvent": "Stop", "command": "true",
                    "stdout": "", "stderr": "", "exitCode": "0", "durationMs": 10**30},
    )
    summary = envelope(
        "system", uid(5), uid(4), "2026-09-16T08:00:05.000Z", subtype="stop_hook_summary", hookCount=2,
        hookInfos=[{"command": "true", "durationMs": 12}, {"command": "false", "durationMs": "slow"}],
        hookErrors=[], preventedContinuation=False, stopReason="", hasOutput=False, level="suggestion",
    )
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn"),
        boundary,
        hook,
        summary,
    ])
    t = run(src, out)
    compaction = rows(t["compactions"], session_key=SID)[0]
    assert (compaction["pre_tokens"], compaction["post_tokens"]) == (None, 900)  # 1.5 is not rounded to 2
    hook_row = rows(t["hooks"], session_key=SID)[0]
    assert (hook_row["exit_code"], hook_row["duration_ms"]) == (None, None)  # "0" is text, 10^30 overflows
    durations = [r["duration_ms"] for r in rows(t["hooks"], session_key=SID) if r["native_form"] != hook_row["native_form"]]
    assert durations == [12, None]
    assert_numbers_not_mapped(t, [
        ("compactMetadata.preTokens=1.5", 3),
        ('attachment.exitCode="0"', 4),
        (f"attachment.durationMs={10**30}", 4),
        ('hookInfos[1].durationMs="slow"', 5),
    ])


def test_counts_under_keyed_and_listed_fields_take_json_integers_only(src, out):
    """cost-state modelUsage, file-history-snapshot versions, api-request keep and applied_edits counts:
    a float, a string or an overflowing number is null and named in the number_not_mapped loss."""
    cost = envelope(
        "cost-state", uid(3), uid(2), "2026-09-16T08:00:03.000Z", totalCostUSD=0.5,
        modelUsage={"claude-opus-4-7": {"inputTokens": 10, "outputTokens": 2.5},
                    "a/b~c": {"inputTokens": 10**30, "outputTokens": 7}},
    )
    snapshot = {
        "type": "file-history-snapshot", "messageId": uid(1), "isSnapshotUpdate": False,
        "snapshot": {"messageId": uid(1), "timestamp": "2026-09-16T08:00:04.000Z", "trackedFileBackups": {
            "src/app.py": {"backupFileName": "abc@v2", "version": "2", "backupTime": "2026-09-16T08:00:04.000Z"},
            "src/ok.py": {"backupFileName": "def@v3", "version": 3, "backupTime": "2026-09-16T08:00:04.000Z"},
        }},
    }
    pruned = assistant(uid(5), uid(3), "msg_01B", [TEXT], stop="end_turn")
    pruned["message"]["context_management"] = {"applied_edits": [
        {"type": "clear_tool_uses_20250919", "cleared_input_tokens": 1.5, "cleared_tool_uses": 3},
    ]}
    write_jsonl(src / f"{SID}.jsonl", [
        user(uid(1), None, "hello"),
        assistant(uid(2), uid(1), "msg_01A", [TEXT], stop="end_turn"),
        cost,
        snapshot,
        pruned,
    ])
    t = run(src, out)
    summary = rows(t["usage_summaries"], session_key=SID)[0]
    assert (summary["input_uncached_tokens"], summary["output_total_tokens"]) == (10, 7)
    versions = {r["path"]: r["version"] for r in rows(t["checkpoint_files"], session_key=SID)}
    assert versions == {"src/app.py": None, "src/ok.py": 3}
    prune = rows(t["compactions"], session_key=SID, compaction_kind="prune")[0]
    assert (prune["tokens_saved"], prune["cleared_tool_uses"]) == (None, 3)
    assert_numbers_not_mapped(t, [
        ("modelUsage.claude-opus-4-7.outputTokens=2.5", 3),
        (f"modelUsage.a/b~c.inputTokens={10**30}", 3),
        ('snapshot.trackedFileBackups.src/app.py.version="2"', 4),
        ("message.context_management.applied_edits[0].cleared_input_tokens=1.5", 5),
    ])
