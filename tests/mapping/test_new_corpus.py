"""Registry items on real transcripts of Claude Code 2.1.158-2.1.199 (tests/fixtures/corpus/claude-code-2.1.1xx).

Expected values are read from the transcript lines here, with json.loads and plain Python, never with
the converter's own functions; line numbers named in a test were checked by reading the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pytest

from conftest import CORPUS, NEW_CORPUS, one, part_native, rows

CUTESTICKY = "bd282509-c6ca-4b2e-ad2d-3d9cd0bb8be5"  # 2.1.158
PV = "dbea81d5-9c8d-465e-934a-a8857a479d61"  # 2.1.185
TOKENS = "be80e9bc-44fd-4e97-abd0-5d14c5d3e626"  # 2.1.181
SIGNAL_4 = "3b5a9bec-34c4-48d5-9502-dd21f9e1e011"  # 2.1.179
SIGNAL_10 = "47f1677e-c6c9-4dba-8e3f-1e3dfe715b26"  # 2.1.179
SIGNAL_6 = "b4204c32-77ab-409a-9627-b677ca8be616"  # 2.1.179
GIT_SYNC_199 = "1e0a84da-d36b-4e8a-925c-b32310479358"  # 2.1.199
GIT_SYNC_183 = "4f8f5e9b-9f90-4c22-88b9-988c55f45833"  # 2.1.183


@pytest.fixture(scope="module")
def corpus(corpus_tables: Mapping[str, pl.DataFrame]) -> Mapping[str, pl.DataFrame]:
    return corpus_tables


def path_of(session: str) -> Path:
    return next(NEW_CORPUS.rglob(f"{session}.jsonl"))


def source_file(session: str) -> str:
    return "corpus/" + path_of(session).relative_to(CORPUS).as_posix()


def lines(session: str) -> list[tuple[int, dict]]:
    """(1-based line number, object) of every non-blank line of a session's file."""
    text = path_of(session).read_text(encoding="utf-8")
    return [(n, json.loads(line)) for n, line in enumerate(text.split("\n"), 1) if line.strip()]


def line_of(corpus: dict, session: str, line: int) -> dict:
    return one(corpus["source_lines"], source_file=source_file(session), line=line)


# --------------------------------------------------------------------------- repeated metadata


def expected_permission_changes(session: str) -> list[tuple[int, str]]:
    """(line, mode) of each change of the session's permission mode: permission-mode lines and
    prompts' permissionMode are one value, and a value equal to the current one is no change."""
    current, changes = None, []
    for n, obj in lines(session):
        if obj.get("type") == "permission-mode" or (obj.get("type") == "user" and "permissionMode" in obj):
            if obj["permissionMode"] != current:
                changes.append((n, obj["permissionMode"]))
                current = obj["permissionMode"]
    return changes


def test_real_permission_mode_line_repeating_a_prompts_mode_is_no_change(corpus):
    # line 10: a prompt in plan mode; line 27: the permission-mode line written after it says plan again;
    # line 72: a prompt back in bypassPermissions; line 78: the line repeating it
    for line, setter in ((27, 10), (78, 72)):
        repeated = line_of(corpus, CUTESTICKY, line)
        prompt = line_of(corpus, CUTESTICKY, setter)
        assert (repeated["status"], repeated["reason"]) == ("duplicate", "unchanged_value")
        assert repeated["record_id"] == prompt["record_id"] == f"{CUTESTICKY}:{dict(lines(CUTESTICKY))[setter]['uuid']}"
        assert json.loads(repeated["native"])["type"] == "permission-mode"
    events = rows(corpus["session_events"], session_key=CUTESTICKY, field="permission_mode").sort("seq")
    assert [r["record_id"] for r in events.iter_rows(named=True)][1:3] == [
        line_of(corpus, CUTESTICKY, 10)["record_id"], line_of(corpus, CUTESTICKY, 72)["record_id"],
    ]


@pytest.mark.parametrize("session", [CUTESTICKY, PV, TOKENS, SIGNAL_4, SIGNAL_10, SIGNAL_6, GIT_SYNC_199, GIT_SYNC_183])
def test_real_permission_mode_events_are_the_changes_of_one_session_value(corpus, session):
    events = rows(corpus["session_events"], session_key=session, field="permission_mode").sort("seq")
    got = [
        (line_of_record(corpus, r["record_id"]), r["value"]) for r in events.iter_rows(named=True)
    ]
    assert got == expected_permission_changes(session)
    # a permission-mode line that is no change has no record of its own
    changing = {n for n, _ in expected_permission_changes(session)}
    for n, obj in lines(session):
        if obj.get("type") == "permission-mode" and n not in changing:
            assert line_of(corpus, session, n)["reason"] == "unchanged_value", n


def line_of_record(corpus: dict, record_id: str) -> int:
    return one(corpus["records"], record_id=record_id)["source_line"]


# --------------------------------------------------------------------------- shell exit codes


def test_real_background_exit_codes_are_kept_with_their_evidence_and_not_declared_lost(corpus):
    # independent reading: TaskOutput results with task.exitCode, and the Bash call that launched each task
    launched, read = {}, {}
    for n, obj in lines(CUTESTICKY):
        result = obj.get("toolUseResult")
        if not isinstance(result, dict):
            continue
        call_id = obj["message"]["content"][0]["tool_use_id"]
        if result.get("backgroundTaskId"):
            launched[result["backgroundTaskId"]] = call_id
        task = result.get("task")
        if isinstance(task, dict) and "exitCode" in task:
            read[task["task_id"]] = (task["exitCode"], obj["uuid"])
    assert sorted(read) == ["bdgphe46i", "beo9xpu6s"]
    tasks = corpus["background_tasks"].filter(pl.col("exit_code").is_not_null() & (pl.col("session_key") == CUTESTICKY))
    got = {r["task_id"]: (r["exit_code"], r["exit_code_record_id"], r["exit_code_source"], r["call_id"])
           for r in tasks.iter_rows(named=True)}
    assert got == {
        task_id: (code, f"{CUTESTICKY}:{uuid}", "task_output", launched[task_id]) for task_id, (code, uuid) in read.items()
    }
    # the loss counts the shell calls of the stream without a native exit code
    shell_calls = {
        block["id"]
        for _, obj in lines(CUTESTICKY) if obj.get("type") == "assistant"
        for block in obj["message"]["content"] if block.get("type") == "tool_use" and block["name"] in ("Bash", "PowerShell")
    }
    # and a person's `!` command (<bash-input>) is a shell call too
    user_commands = [
        n for n, obj in lines(CUTESTICKY)
        if obj.get("type") == "user" and isinstance(obj["message"]["content"], str)
        and obj["message"]["content"].startswith("<bash-input>")
    ]
    assert len(user_commands) == 1
    loss = one(corpus["losses"], session_key=CUTESTICKY, category="shell_exit_code")
    assert loss["count"] == len(shell_calls - {launched[t] for t in read}) + len(user_commands)


# --------------------------------------------------------------------------- retention


def test_real_subagents_named_but_absent_are_listed_never_claimed_deleted_by_retention(corpus_out, corpus):
    # independent reading: every agentId a tool result names, per session, in the 2.1.1xx files
    named: dict[str, set[str]] = {}
    for session in (CUTESTICKY, PV, TOKENS, SIGNAL_4, SIGNAL_10, SIGNAL_6, GIT_SYNC_199, GIT_SYNC_183):
        for _, obj in lines(session):
            result = obj.get("toolUseResult")
            if isinstance(result, dict) and result.get("agentId"):
                named.setdefault(session, set()).add(result["agentId"])
    assert sum(len(v) for v in named.values()) >= 14
    manifest = json.loads((corpus_out / "manifest.json").read_text())
    retention = manifest["export_report"]["retention"]
    assert "deleted_by_retention is never claimed" in retention["policy"]
    listed: dict[str, set[str]] = {}
    for entry in retention["absent_files"]:
        if entry["kind"] == "subagent_transcript" and entry["session_key"] in named:
            listed.setdefault(entry["session_key"], set()).add(entry["name"])
            assert entry["status"] == "absent" and "deleted_by_retention" in entry["possible_causes"]
    assert listed == {s: {f"agent-{a}.jsonl" for a in agents} for s, agents in named.items()}
    for session, agents in named.items():
        loss = one(corpus["losses"], session_key=session, category="subagent_transcript_absent")
        assert loss["count"] == len(agents)


# --------------------------------------------------------------------------- who wrote a message

ALL_SESSIONS = (CUTESTICKY, PV, TOKENS, SIGNAL_4, SIGNAL_10, SIGNAL_6, GIT_SYNC_199, GIT_SYNC_183)


def record_of(corpus: dict, session: str, uuid: str) -> dict:
    return one(corpus["records"], record_id=f"{session}:{uuid}")


def test_real_origin_kind_sets_author_origin_and_trigger(corpus):
    # registry entry: origin.kind human → author human; task-notification → harness, injected, trigger
    # task_completion; promptSource kept as recorded
    seen = {"human": 0, "task-notification": 0}
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            kind = (obj.get("origin") or {}).get("kind")
            if obj.get("type") != "user" or kind is None:
                continue
            seen[kind] += 1
            row = record_of(corpus, session, obj["uuid"])
            assert row["prompt_source"] == obj.get("promptSource"), obj["uuid"]
            assert row["turn_id"] == obj["promptId"], obj["uuid"]
            if kind == "human":
                assert (row["author"], row["origin"], row["trigger_kind"]) == ("human", "prompt", None), obj["uuid"]
            else:
                assert (row["author"], row["origin"], row["trigger_kind"]) == (
                    "harness", "injected", "task_completion"), obj["uuid"]
    assert seen == {"human": 36, "task-notification": 1}


def test_real_prompt_source_without_origin_kind_names_no_author(corpus):
    # 2.1.179 writes promptSource typed without origin.kind: the entry maps origin.kind, not promptSource,
    # so a typed prompt without other marker has no author (docs/asr-tables.md)
    checked = 0
    for session in (SIGNAL_4, SIGNAL_10, SIGNAL_6):
        for _, obj in lines(session):
            content = (obj.get("message") or {}).get("content")
            if obj.get("type") == "user" and obj.get("promptSource") == "typed" and "origin" not in obj \
                    and not obj.get("isMeta") and isinstance(content, str) and not content.startswith("<"):
                row = record_of(corpus, session, obj["uuid"])
                assert (row["author"], row["origin"], row["prompt_source"]) == (None, None, "typed"), obj["uuid"]
                checked += 1
    assert checked == 13


def test_real_queued_commands_of_a_person_are_steers_and_others_injected(corpus):
    counts = {"steer": 0, "injected": 0}
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            attachment = obj.get("attachment") or {}
            if obj.get("type") != "attachment" or attachment.get("type") != "queued_command":
                continue
            row = record_of(corpus, session, obj["uuid"])
            if (attachment.get("origin") or {}).get("kind") == "human":
                assert (row["author"], row["origin"]) == ("human", "steer"), obj["uuid"]
                counts["steer"] += 1
            else:
                assert (row["author"], row["origin"]) == ("harness", "injected"), obj["uuid"]
                counts["injected"] += 1
    assert counts["steer"] == 3 and counts["injected"] > 0


def test_real_attachments_are_data_parts_of_their_type(corpus):
    # one data part per attachment record, schema named after its type, holding the attachment verbatim
    expected: dict[str, dict] = {}
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            if obj.get("type") == "attachment":
                expected[f"{session}:{obj['uuid']}"] = obj["attachment"]  # the latest copy of a uuid is kept
    data = corpus["parts"].filter(pl.col("record_id").is_in(list(expected)) & (pl.col("part_type") == "data"))
    assert data.height == len(expected) == data["record_id"].n_unique()
    for row in data.iter_rows(named=True):
        attachment = expected[row["record_id"]]
        assert row["schema"] == f"com.anthropic.claude-code/attachment/{attachment['type']}"
        assert part_native(corpus, row) == attachment
        empty = set(attachment) == {"type"}
        assert row["capture_state"] == ("empty" if empty else "complete"), row["record_id"]


# --------------------------------------------------------------------------- workspace and VCS

PR_ACTIONS = {"created": "pr_open", "edited": "pr_update", "merged": "pr_merge", "commented": "pr_comment",
              "closed": "pr_close", "reopened": "pr_reopen", "ready": "pr_ready", "draft": "pr_draft"}


def test_real_git_operations_are_vcs_events_parsed_from_the_output(corpus):
    expected = set()
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            result = obj.get("toolUseResult")
            if not isinstance(result, dict) or "gitOperation" not in result:
                continue
            call_id = obj["message"]["content"][0]["tool_use_id"]
            op = result["gitOperation"]
            if "commit" in op:
                expected.add((session, call_id, "commit", op["commit"]["sha"], None, None, op["commit"]["kind"]))
            if "push" in op:
                expected.add((session, call_id, "push", None, op["push"]["branch"], None, None))
            if "pr" in op:
                pr = op["pr"]
                expected.add((session, call_id, PR_ACTIONS[pr["action"]], None, None, pr["number"], pr["action"]))
    assert len(expected) == 8
    parsed = rows(corpus["vcs_events"], evidence="parsed_output")
    got = {
        (r["session_key"], r["call_id"], r["action"], r["commit_id"], r["branch"], r["pr_number"], r["native_action"])
        for r in parsed.iter_rows(named=True)
    }
    assert got == expected
    assert parsed.height == len(expected)


def test_real_pr_link_lines_are_one_reported_vcs_event_per_link(corpus):
    links: dict[tuple, int] = {}
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            if obj.get("type") == "pr-link":
                key = (session, obj["prNumber"], obj["prUrl"], obj["prRepository"])
                links[key] = links.get(key, 0) + 1
    assert links == {(GIT_SYNC_183, 96, "https://github.com/entireio/git-sync/pull/96", "entireio/git-sync"): 2}
    reported = rows(corpus["vcs_events"], evidence="reported")
    got = {(r["session_key"], r["pr_number"], r["pr_url"], r["repository"]): r["observation_count"]
           for r in reported.iter_rows(named=True)}
    assert got == links
    assert set(reported["action"]) == {"pr_link"}


# --------------------------------------------------------------------------- session-level values


def expected_changes(session: str, native_type: str, value) -> list[tuple[int, object]]:
    """(line, value) of each line of a type whose value differs from the previous line of that type."""
    changes, previous = [], object()
    for n, obj in lines(session):
        if obj.get("type") == native_type and value(obj) != previous:
            changes.append((n, value(obj)))
            previous = value(obj)
    return changes


def events(corpus: dict, session: str, field: str) -> list[dict]:
    found = rows(corpus["session_events"], session_key=session, field=field).sort("seq")
    return [dict(r, line=line_of_record(corpus, r["record_id"])) for r in found.iter_rows(named=True)]


@pytest.mark.parametrize("session", ALL_SESSIONS)
def test_real_last_prompt_changes_and_the_active_leaf(corpus, session):
    expected = expected_changes(session, "last-prompt", lambda o: (o.get("lastPrompt"), o.get("leafUuid")))
    got = [(e["line"], (e["value"], e["leaf_uuid"])) for e in events(corpus, session, "last_prompt")]
    assert got == expected
    # registry entry, Tree: the active leaf is the latest last-prompt record's leafUuid
    latest = [o for _, o in lines(session) if o.get("type") == "last-prompt"][-1]
    row = one(corpus["sessions"], session_key=session)
    assert row["active_leaf_uuid"] == latest["leafUuid"]
    # the record holding that uuid: a response's lines fold into one record keyed by message.id
    leaf = next(o for _, o in lines(session) if o.get("uuid") == latest["leafUuid"])
    key = f"msg:{leaf['message']['id']}" if leaf["type"] == "assistant" else leaf["uuid"]
    assert row["active_leaf_record_id"] == f"{session}:{key}"


@pytest.mark.parametrize("session", ALL_SESSIONS)
def test_real_mode_and_ai_title_are_events_on_change_only(corpus, session):
    modes = expected_changes(session, "mode", lambda o: o["mode"])
    got = [(e["line"], e["value"]) for e in events(corpus, session, "mode")]
    assert got == modes
    assert {e["event_kind"] for e in events(corpus, session, "mode")} <= {"config_change"}
    titles = expected_changes(session, "ai-title", lambda o: o["aiTitle"])
    got = [(e["line"], e["value"], e["title_source"]) for e in events(corpus, session, "title")]
    assert got == [(n, v, "model") for n, v in titles]
    session_row = one(corpus["sessions"], session_key=session)
    assert (session_row["title"], session_row["title_source"]) == (
        (titles[-1][1], "model") if titles else (None, None)
    )


def test_real_turn_id_is_the_prompt_id_of_every_user_line(corpus):
    # registry entry, Entity keys: turnId is the user record's promptId (2.1.x writes it on every user line)
    expected = {}
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            # a compact summary is no message: it folds into its compact_boundary (ASR-373)
            if obj.get("type") == "user" and not obj.get("isCompactSummary"):
                expected[f"{session}:{obj['uuid']}"] = obj.get("promptId")
    found = corpus["records"].filter(pl.col("record_id").is_in(list(expected)))
    assert found.height == len(expected) > 900
    assert {r["record_id"]: r["turn_id"] for r in found.iter_rows(named=True)} == expected


def test_real_task_stop_stops_its_background_task(corpus):
    # TaskStop {task_id} answered without error: the task is stopped, unless later evidence revises it
    stops = {}
    for n, obj in lines(CUTESTICKY):
        for block in (obj.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == "TaskStop":
                stops[block["id"]] = block["input"]["task_id"]
    assert sorted(stops.values()) == ["baux4lf26", "bxi63s6gk"]
    result_line = {}
    for n, obj in lines(CUTESTICKY):
        for block in (obj.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result" and block["tool_use_id"] in stops:
                result_line[stops[block["tool_use_id"]]] = (n, obj["uuid"])
    text = path_of(CUTESTICKY).read_text(encoding="utf-8").split("\n")
    for task_id, (n, uuid) in result_line.items():
        later = any(f"<task-id>{task_id}</task-id>" in line for line in text[n:])
        row = one(corpus["background_tasks"], session_key=CUTESTICKY, task_id=task_id)
        if later:  # a notification after the stop revises it (baux4lf26: failed)
            assert row["status_source"] == "task_notification"
        else:
            assert (row["status"], row["status_source"], row["status_record_id"]) == (
                "stopped", "task_stop", f"{CUTESTICKY}:{uuid}")
    assert any(not any(f"<task-id>{t}</task-id>" in line for line in text[n:]) for t, (n, _) in result_line.items())


def test_real_mcp_tool_names_are_mcp_provider_calls(corpus):
    # registry entry, Tools: mcp__<server>__<tool> → provider {kind: mcp, identity: unknown}; kind other
    expected = {}
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            for block in (obj.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use" and block["name"].startswith("mcp__"):
                    expected[(session, block["id"])] = (block["name"], block["name"].split("__")[1])
    assert len(expected) == 5
    calls = corpus["tool_calls"].filter(pl.col("tool_name").str.starts_with("mcp__"))
    got = {(r["session_key"], r["call_id"]): (r["tool_name"], r["mcp_server"]) for r in calls.iter_rows(named=True)}
    assert got == expected
    assert set(zip(calls["provider_kind"], calls["tool_kind"], calls["requested_by"])) == {("mcp", "other", "model")}


def test_real_mcp_attribution_stays_on_the_inference(corpus):
    # registry entry: attributionMcpServer and attributionMcpTool remain on the inference (attributedTo)
    by_response: dict[tuple, set] = {}
    for session in ALL_SESSIONS:
        for _, obj in lines(session):
            if obj.get("type") == "assistant" and obj.get("attributionMcpServer"):
                key = (session, obj["message"]["id"])
                by_response.setdefault(key, set()).add((obj["attributionMcpServer"], obj.get("attributionMcpTool")))
    assert len(by_response) == 70 and all(len(v) == 1 for v in by_response.values())
    found = corpus["inferences"].filter(pl.col("attributed_mcp_server").is_not_null())
    got = {(r["session_key"], r["inference_id"]): {(r["attributed_mcp_server"], r["attributed_mcp_tool"])}
           for r in found.iter_rows(named=True)}
    assert got == by_response
