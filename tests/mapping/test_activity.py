"""Tool activity: input_requests, background_tasks and tool_progress, on authored fixtures and the real corpus.

Authored fixtures (tests/fixtures/registry/activity, see its README.md) do not qualify a Claude Code
version; the corpus tests do, for the versions their files were written by.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pytest

import batch
from conftest import FIXTURES, SID, TEXT, assistant, older, one, uid, user, write_jsonl

REGISTRY = FIXTURES / "registry" / "activity"
TABLE_NAMES = ("input_requests", "background_tasks", "tool_progress", "records")

QUESTIONS_SID = "3a0f6c1e-5b7d-4e2a-9c41-0d8e2f7a6b10"
BACKGROUND_SID = "5c2e9a7b-1f3d-4b6a-8e05-7a9c3d1b2e40"
PROGRESS_SID = "8d4b2f6a-9e1c-4a7d-b350-2c6e8f0a1d93"
SPOTTER_ASK_SID = "491e126e-1e71-469c-ade2-fcc8af567c74"  # marot-spotter/subagent.jsonl, 2.1.38
SPOTTER_GQC_SID = "258c7280-ae70-4798-800f-63464d01a85d"  # marot-spotter, 2.1.39
JSSOUND_SID = "7acd37a8-2745-4b58-a8a9-46164b22ad9e"  # daaain JSSoundRecorder, 2.0.42


def read(out: Path) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(out / name / "*.parquet") for name in TABLE_NAMES}


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    out = tmp_path_factory.mktemp("activity-registry") / "out"
    batch.convert([REGISTRY], out)
    return read(out)


@pytest.fixture(scope="module")
def corpus(corpus_tables: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    return {name: corpus_tables[name] for name in TABLE_NAMES}


def request(tables: dict[str, pl.DataFrame], call_id: str) -> dict:
    row = one(tables["input_requests"], call_id=call_id)
    for key in ("questions", "answers", "annotations", "native"):
        row[key] = json.loads(row[key]) if row[key] is not None else None
    return row


def task(tables: dict[str, pl.DataFrame], session_key: str, **where) -> dict:
    row = one(tables["background_tasks"], session_key=session_key, **where)
    row["native"] = json.loads(row["native"])
    return row


def record(tables: dict[str, pl.DataFrame], record_id: str) -> dict:
    return one(tables["records"], record_id=record_id)


# --- Questions: AskUserQuestion → input_request --------------------------------------------


def test_real_answers_map_to_selected_labels(corpus):
    row = request(corpus, "toolu_01RsKEmE8Mc3wD8Vex5b6Zne")
    assert row["session_key"] == SPOTTER_ASK_SID
    assert (row["mode"], row["status"], row["question_count"]) == ("questions", "answered", 2)
    assert [q["id"] for q in row["questions"]] == ["0", "1"]
    assert row["questions"][1]["header"] == "Tools"
    assert [o["label"] for o in row["questions"][0]["options"]] == ["spotter", "No rig"]
    assert row["answers"] == [
        {"question_id": "0", "question": row["questions"][0]["question"], "selected": ["No rig"]},
        {"question_id": "1", "question": "Which tools should we set up?", "selected": ["Credo + Dialyxir + mix_audit"]},
    ]
    assert record(corpus, row["result_record_id"])["kind"] == "tool_result"
    assert row["call_record_id"] == f"{SPOTTER_ASK_SID}:msg:msg_0179FgGtJzf3MkRAWS4a4tbE"
    assert row["resolved_at"] > row["asked_at"]
    assert row["native"]["toolUseResult"]["answers"]["Which tools should we set up?"] == "Credo + Dialyxir + mix_audit"


def test_corpus_has_one_input_request_per_ask_user_question_call(corpus):
    # before 2.1.158 (the newer sessions are checked in tests/mapping/test_new_corpus.py)
    assert older(corpus["input_requests"]).height == 1
    assert corpus["input_requests"].select(pl.col("status").is_null().any()).item() is False


def test_question_ids_are_positions(authored):
    row = request(authored, "toolu_01QAnswered00000000000001")
    assert [q["id"] for q in row["questions"]] == ["0", "1", "2"]
    assert [q["multiSelect"] for q in row["questions"]] == [False, True, False]
    assert row["questions"][2] | {"options": None} == {
        "id": "2", "question": "How long should entries live?", "header": "TTL", "options": None, "multiSelect": False,
    }


def test_several_choices_joined_by_commas_are_selected_labels(authored):
    answers = {a["question_id"]: a for a in request(authored, "toolu_01QAnswered00000000000001")["answers"]}
    assert answers["0"] == {"question_id": "0", "question": "Which cache backend should I use?",
                            "selected": ["Redis (Recommended)"]}
    assert answers["1"]["selected"] == ["/search", "/reports"]
    assert "text" not in answers["1"]


def test_answer_that_is_no_label_is_text_verbatim(authored):
    answers = {a["question_id"]: a for a in request(authored, "toolu_01QAnswered00000000000001")["answers"]}
    assert answers["2"] == {"question_id": "2", "question": "How long should entries live?",
                            "text": "10 minutes, unless the data is user-specific"}


def test_label_and_other_reply_in_one_value(authored):
    row = request(authored, "toolu_01QMixed0000000000000002")
    assert row["answers"] == [{"question_id": "0", "question": "Which metrics should the dashboard show?",
                               "selected": ["Hit rate"], "text": "eviction count"}]
    notes = {"notes": "eviction count is a custom metric"}
    assert row["annotations"] == {"Which metrics should the dashboard show?": notes}
    assert row["status"] == "answered"


def test_afk_timeout_resolves_as_timed_out(authored):
    row = request(authored, "toolu_01QAfk000000000000000003")
    assert (row["status"], row["afk_timeout_ms"], row["answers"]) == ("timed_out", 60000, [])
    assert row["result_record_id"] is not None


def test_free_text_response(authored):
    row = request(authored, "toolu_01QFree00000000000000004")
    assert row["status"] == "answered"
    assert row["response"] == "Put it next to the other service configs, I will move it later."
    assert row["answers"] == []


def test_declined_question_is_rejected(authored):
    row = request(authored, "toolu_01QRejected0000000000005")
    assert (row["status"], row["is_error"], row["answers"]) == ("rejected", True, None)
    assert row["native"]["toolUseResult"] == "User rejected tool use"
    assert row["native"]["tool_result"]["is_error"] is True


def test_question_without_result_is_pending(authored):
    row = request(authored, "toolu_01QPending000000000000006")
    assert (row["status"], row["result_record_id"], row["resolved_at"]) == ("pending", None, None)
    assert row["questions"][0]["question"] == "Which eviction policy?"
    assert row["native"]["tool_use"]["name"] == "AskUserQuestion"
    assert row["native"]["toolUseResult"] is None


def test_every_authored_question_call_is_a_row(authored):
    frame = authored["input_requests"].filter(pl.col("session_key") == QUESTIONS_SID)
    assert sorted(frame["status"].to_list()) == sorted(
        ["answered", "answered", "timed_out", "answered", "rejected", "pending"]
    )


# --- Background work: terminals, subagents, status revisions ------------------------------------


def test_real_background_bash_with_bash_output_and_kill_shell(corpus):
    killed = task(corpus, JSSOUND_SID, task_id="dce0af")
    assert (killed["task_kind"], killed["tool_name"], killed["is_async"]) == ("shell", "Bash", True)
    assert (killed["is_requested_background"], killed["command"]) == (True, "pnpm dev")
    # the launch, a BashOutput read (running), a KillShell (killed); the later failing KillShell changes nothing
    assert (killed["status"], killed["status_source"], killed["evidence_count"]) == ("killed", "kill_shell", 3)
    assert record(corpus, killed["status_record_id"])["kind"] == "tool_result"
    running = task(corpus, JSSOUND_SID, task_id="01910a")
    assert (running["status"], running["status_source"], running["exit_code"]) == ("running", "bash_output", None)
    assert running["native"]["launch"]["backgroundTaskId"] == "01910a"


def test_real_command_moved_to_background_is_a_terminal(corpus):
    row = task(corpus, SPOTTER_GQC_SID, task_id="b0be39e")
    assert (row["task_kind"], row["is_async"], row["is_requested_background"]) == ("shell", True, False)
    assert row["description"] == "Force recompile ash deps to clear stale associations"
    # revised by the queued notification and the delivered user line
    assert (row["status"], row["status_source"], row["evidence_count"]) == ("completed", "task_notification", 3)
    assert row["output_file"].endswith("/tasks/b0be39e.output")
    assert row["summary"].startswith('Background command "Force recompile ash deps')


def test_real_task_output_and_waiting_for_task_revise_the_terminal(corpus):
    row = task(corpus, SPOTTER_GQC_SID, task_id="bd0afab")
    assert (row["status"], row["exit_code"], row["native_task_type"]) == ("completed", 0, "local_bash")
    kinds = [record(corpus, r)["native_subtype"] or record(corpus, r)["kind"] for r in row["evidence_record_ids"]]
    assert kinds.count("waiting_for_task") == 3
    assert kinds.count("enqueue") == 1
    assert row["evidence_count"] == 8
    assert "<task-id>bd0afab</task-id>" in row["native"]["latest"]


def test_real_background_tasks_are_all_found(corpus):
    frame = older(corpus["background_tasks"])
    assert sorted(frame["task_id"].to_list()) == ["01910a", "b0be39e", "bae407b", "bd0afab", "dce0af"]
    heavy = one(frame, task_id="bae407b")
    assert (heavy["status"], heavy["status_source"]) == ("running", "launch_result")
    # the output path as the transcript's machine recorded it
    assert heavy["output_file"] == "/tmp" + "/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output"


def test_background_shell_revised_by_notifications_and_task_status(authored):
    row = task(authored, BACKGROUND_SID, task_id="b7k2m9q1x")
    assert (row["task_kind"], row["call_id"], row["is_async"]) == ("shell", "toolu_01BShell00000000000000001", True)
    assert (row["command"], row["description"]) == ("pytest -q", "Run the test suite")
    assert (row["status"], row["status_source"]) == ("completed", "task_notification")
    assert row["native_task_type"] == "local_bash"
    sources = [record(authored, r)["native_type"] for r in row["evidence_record_ids"]]
    assert sources == ["user", "queue-operation", "attachment", "user"]
    assert row["summary"] == 'Background command "Run the test suite" completed (exit code 0)'
    assert row["output_file"].endswith("/tasks/b7k2m9q1x.output")


def test_monitor_is_a_terminal_stopped_by_task_stop(authored):
    row = task(authored, BACKGROUND_SID, task_id="bmon4d2e8")
    assert (row["task_kind"], row["tool_name"], row["is_requested_background"]) == ("monitor", "Monitor", None)
    assert row["command"] == "tail -f logs/app.log | grep --line-buffered ERROR"
    assert (row["status"], row["status_source"]) == ("stopped", "task_stop")
    assert row["native"]["latest"]["task_id"] == "bmon4d2e8"
    assert row["native"]["launch"] == {"taskId": "bmon4d2e8", "timeoutMs": 600000, "persistent": True}
    # a monitor event carries no status: it is evidence, it does not set one
    assert row["evidence_count"] == 3
    assert row["summary"].startswith("Monitor event")


def test_failing_task_stop_changes_nothing(authored):
    assert authored["background_tasks"].filter(pl.col("task_id") == "bzz000000").height == 0
    assert authored["background_tasks"].filter(pl.col("status") == "stopped").height == 1


def test_background_agent_is_an_async_subagent(authored):
    row = task(authored, BACKGROUND_SID, task_id="a3f9c2d1e8b7a6054")
    assert (row["task_kind"], row["is_async"], row["agent_id"]) == ("subagent", True, "a3f9c2d1e8b7a6054")
    assert (row["tool_name"], row["is_requested_background"]) == ("Agent", True)
    assert row["description"] == "Audit auth module"
    assert (row["status"], row["status_source"]) == ("completed", "task_notification")
    assert row["native_task_type"] == "local_agent"
    subtypes = [record(authored, r)["native_subtype"] for r in row["evidence_record_ids"]]
    assert "task_status" in subtypes
    assert row["native"]["launch"]["status"] == "async_launched"
    assert row["summary"] == 'Agent "Audit auth module" completed'


def test_waiting_for_task_revises_subagent_status(authored):
    row = task(authored, BACKGROUND_SID, task_id="a7e1d0c9b8a7f6e52")
    assert (row["task_kind"], row["status"], row["status_source"]) == ("subagent", "running", "waiting_for_task")
    assert record(authored, row["status_record_id"])["native_subtype"] == "waiting_for_task"
    latest = {"type": "waiting_for_task", "taskDescription": "Review docs", "taskType": "local_agent"}
    assert row["native"]["latest"] == latest


def test_notification_for_a_task_not_launched_here_is_kept(authored):
    row = task(authored, BACKGROUND_SID, task_id="bq9r8s7t6")
    assert (row["status"], row["status_source"], row["task_kind"], row["call_id"]) == (
        "failed", "task_notification", None, None,
    )
    assert row["native"]["launch"] is None


def test_background_launch_without_result_is_pending(authored):
    row = task(authored, BACKGROUND_SID, call_id="toolu_01BPending0000000000000009")
    assert (row["task_id"], row["status"], row["status_source"]) == (None, "pending", "launch_call")
    assert (row["task_kind"], row["is_async"], row["command"]) == ("shell", None, "npm run e2e")
    assert authored["background_tasks"].filter(pl.col("session_key") == BACKGROUND_SID).height == 6


# --- Progress records ---------------------------------------------------------------------------


def test_real_progress_lines_are_all_summarised(corpus):
    frame = corpus["tool_progress"]
    bash = frame.filter(pl.col("progress_types").list.contains("bash_progress"))
    waiting = frame.filter(pl.col("progress_types").list.contains("waiting_for_task"))
    assert bash["update_count"].sum() == 518
    assert waiting["update_count"].sum() == 3
    types = set(frame["progress_types"].explode().to_list())
    assert types == {"bash_progress", "waiting_for_task"}  # hook_progress and agent_progress are read elsewhere


def test_real_bash_progress_of_one_call(corpus):
    row = one(corpus["tool_progress"], call_id="toolu_01NJnxGx5djuhZxzyADD3hKf")
    assert (row["session_key"], row["tool_name"], row["update_count"]) == (SPOTTER_GQC_SID, "Bash", 28)
    assert (row["elapsed_ms"], row["timeout_ms"], row["total_lines"]) == (29000, 30000, 0)
    first, last = record(corpus, row["first_record_id"]), record(corpus, row["last_record_id"])
    assert (first["kind"], first["native_subtype"]) == ("progress", "bash_progress")
    assert (last["kind"], last["native_subtype"]) == ("progress", "bash_progress")
    assert first["seq"] < last["seq"]
    assert json.loads(row["native"])["toolUseID"] == json.loads(last["native"])["toolUseID"]


def test_real_waiting_for_task_names_the_task(corpus):
    rows = corpus["tool_progress"].filter(pl.col("progress_types").list.contains("waiting_for_task"))
    assert rows["tool_name"].unique().to_list() == ["TaskOutput"]
    assert rows["waiting_task_id"].unique().to_list() == ["bd0afab"]
    assert rows["waiting_task_type"].unique().to_list() == ["local_bash"]
    assert rows["waiting_task_description"].unique().to_list() == ["Run resource and renderer tests"]


def test_bash_progress_gives_output_and_task(authored):
    row = one(authored["tool_progress"], call_id="toolu_01PBash000000000000000001")
    # the hook_progress line of the call is not counted
    assert (row["progress_types"], row["update_count"]) == (["bash_progress"], 3)
    assert row["last_output"] == "cc -c util.c\nld -o app main.o util.o"
    assert row["last_full_output"] == "cc -c main.c\ncc -c util.c\nld -o app main.o util.o"
    assert (row["elapsed_ms"], row["total_lines"], row["total_bytes"], row["timeout_ms"]) == (4000, 3, 49, 120000)
    assert row["task_id"] == "bx4c7v1n2"


def test_mcp_progress_gives_status(authored):
    row = one(authored["tool_progress"], call_id="toolu_01PMcp0000000000000000002")
    assert (row["tool_name"], row["mcp_server"], row["mcp_tool"]) == (
        "mcp__episodic-memory__search", "episodic-memory", "search",
    )
    assert (row["mcp_status"], row["elapsed_ms"], row["update_count"]) == ("completed", 1834, 2)


def test_web_search_progress_gives_queries_and_results(authored):
    row = one(authored["tool_progress"], call_id="toolu_01PSearch000000000000000003")
    assert row["progress_types"] == ["query_update", "search_results_received"]
    assert row["queries"] == ["pytest-xdist loadgroup", "pytest-xdist --dist loadgroup docs"]
    assert (row["search_count"], row["result_count"], row["update_count"]) == (2, 17, 4)
    assert row["last_output"] is None


def test_authored_waiting_for_task_row(authored):
    row = one(authored["tool_progress"], call_id="toolu_01BWait000000000000000008")
    assert (row["waiting_task_id"], row["waiting_task_type"]) == ("a7e1d0c9b8a7f6e52", "local_agent")
    assert row["search_count"] is None


def test_every_progress_line_stays_a_record(authored):
    records = authored["records"].filter(pl.col("session_key") == PROGRESS_SID)
    progress = records.filter(pl.col("native_type") == "progress")
    assert progress.height == 10  # 1 hook + 3 bash + 2 mcp + 4 web search
    summarised = authored["tool_progress"].filter(pl.col("session_key") == PROGRESS_SID)["update_count"].sum()
    assert summarised == progress.filter(pl.col("native_subtype") != "hook_progress").height


def test_stream_without_tool_activity_writes_empty_tables(src, out):
    write_jsonl(src / f"{SID}.jsonl", [user(uid(1), None, "hello"), assistant(uid(2), uid(1), "msg_01A", [TEXT])])
    tables = read(batch.convert([src], out).out)
    assert tables["records"].height == 2
    assert [tables[n].height for n in ("input_requests", "background_tasks", "tool_progress")] == [0, 0, 0]
