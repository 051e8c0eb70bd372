"""Registry items the core maps, each shown on authored lines and, where it has the case, the real corpus.

Items (registry entry for claude-code): who wrote a message, triggers, repeated metadata, tools,
approvals, queue withdrawal, structured attachments and persisted outputs, usage, lineage and tree,
agent_progress copies, unknown types, unassigned facts, losses.

Authored fixtures (tests/fixtures/registry/core, see its README.md) do not qualify a Claude Code
version; the corpus tests do, for the versions their files were written by.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import duckdb
import polars as pl
import pytest

import batch
from conftest import CORPUS, FIXTURES, NEW_CORPUS, older, one, part_native, rows

REGISTRY = FIXTURES / "registry" / "core"
TABLE_NAMES = (
    "records", "parts", "tool_calls", "inferences", "inference_observations", "session_events", "sessions",
    "lineage", "losses", "source_lines",
)

# authored sessions (one per scenario folder)
AUTHORS = "10000000-0000-4000-8000-000000000001"
LAUNCH = "10000000-0000-4000-8000-000000000002"
TRIGGERS = "20000000-0000-4000-8000-000000000001"
METADATA = "30000000-0000-4000-8000-000000000001"
MODE_BACK = "30000000-0000-4000-8000-000000000002"
TOOLS = "40000000-0000-4000-8000-000000000001"
APPROVALS = "50000000-0000-4000-8000-000000000001"
QUEUE = "60000000-0000-4000-8000-000000000001"
ATTACHMENTS = "70000000-0000-4000-8000-000000000001"
USAGE = "80000000-0000-4000-8000-000000000001"
FORK_PARENT = "90000000-0000-4000-8000-000000000000"
FORK = "90000000-0000-4000-8000-000000000001"
TREE = "90000000-0000-4000-8000-000000000002"
SUCCESSOR = "90000000-0000-4000-8000-000000000003"
FORK_AGENT = f"{TREE}/af0f0f0f00000001"
PROGRESS_ABSENT = "a0000000-0000-4000-8000-000000000001"
PROGRESS_PRESENT = "a0000000-0000-4000-8000-000000000002"
UNKNOWN = "b0000000-0000-4000-8000-000000000001"
SUMMARIES = "c0000000-0000-4000-8000-000000000001"

# real corpus sessions
WORKTREES = "ef958aa1-0e93-49f0-bb71-150f63befcd1"  # daaain -experiments-worktrees, 2.1.114
MODEL_CMD = "3680252d-d4e3-4416-bddd-8f5b5b4fdb7f"  # daaain danieldemmel-me-next, 2.0.0 (/model)
SNIFFLY = "fed8ce56-bc79-401f-a83e-af084253362f"  # chiphuyen-sniffly, 1.0.17
SPOTTER_AUTO = "258c7280-ae70-4798-800f-63464d01a85d"  # marot-spotter, 2.1.39
SPOTTER_HEAVY = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # marot-spotter/tool_heavy.jsonl, 2.1.38
SPOTTER_SUB = "491e126e-1e71-469c-ade2-fcc8af567c74"  # marot-spotter/subagent.jsonl, 2.1.38
SPOTTER_MANUAL = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"  # marot-spotter, 2.1.39, with agent-aac57f5
ORPHAN_AGENT = "6c2214d7-b87e-4432-8e41-22ba294ea584/afc096d"  # marot-spotter, parent file absent
FASTHOOKS = "c45af7b1-cb7c-4e51-93db-8cbb250a877a"  # oneryalcin-fasthooks, 2.0.76
JSSOUND = "7acd37a8-2745-4b58-a8a9-46164b22ad9e"  # daaain JSSoundRecorder, 2.0.42
PHANTOM_SUMMARIES = "58c4ae0b-7366-4711-81c0-28442f46bf65"  # rcgray schema-13-2120, 2.1.20
SUMMARY_SPAM = "e74cb27e-9956-4d4f-ba44-f9bcce38e732"  # rcgray schema-13-216, 2.1.6
SHELL_SESSIONS = {  # the 1.0.5x daaain files with a `!` command: (session, input uuid, command)
    "1.0.51": ("326189cf-5676-4237-8cde-1ce80aae4a9f", "181fd020-3612-490a-87f1-9e486e8697fd", "uv run ty check"),
    "1.0.55": ("71c9afe9-d9cc-4583-86b3-e62ba682b83a", "972dc1ad-a704-4770-9c0c-f30aeffe6ede",
               "uv run pytest test/test_project_display_name.py"),
    "1.0.56": ("12a546d1-83a7-49a6-abba-5400db340b43", "9a0d1358-452d-4311-be1f-e305eec384ee",
               "uv run pytest -m browser -v"),
}
SYNTHETIC_ERRORS = {  # rcgray <synthetic> API-error lines: session -> message.id
    "b151f674-388c-48f0-9b04-0384f5a0bfb1": "553e41ca-ada2-45af-8c8f-b2711b3dfe1f",  # 2.1.9
    "fcb76b64-b7bf-419a-b7c1-4fac18c96ca5": "155d977e-3c4a-4a0d-93ce-510dea11d30d",
}

KIND_BY_NAME = {
    "Bash": "execute", "PowerShell": "execute", "Edit": "edit", "Write": "edit", "NotebookEdit": "edit",
    "Read": "read", "Glob": "search", "Grep": "search", "ToolSearch": "search", "WebFetch": "fetch",
    "WebSearch": "fetch",
}


def uid(prefix: str, n: int) -> str:
    """The uuid the fixture generator gave line n of a scenario (prefix is the scenario's)."""
    return f"{prefix}-0000-4000-8000-{n:012d}"


class Tables(dict):
    """Output tables by name, plus the manifest; shown by its folder in failure reports."""

    def __init__(self, out: Path, tables: Mapping[str, pl.DataFrame] | None = None):
        """The tables of `out`, read from it, or taken from `tables` (the same output, read before)."""
        super().__init__({
            name: tables[name] if tables is not None else pl.read_parquet(out / name / "*.parquet") for name in TABLE_NAMES
        })
        self["manifest"] = json.loads((out / "manifest.json").read_text())
        self.out = out

    def __repr__(self) -> str:
        return f"<tables of {self.out}>"


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("registry-core") / "out"
    batch.convert([REGISTRY], out)
    return Tables(out)


@pytest.fixture(scope="module")
def corpus(corpus_out: Path, corpus_tables: Mapping[str, pl.DataFrame]) -> dict:
    return Tables(corpus_out, corpus_tables)




def record(t: dict, session_key: str, key: str) -> dict:
    """The record `<session_key>:<key>` (key: a uuid, `msg:<message.id>` or `line:<n>`)."""
    return one(t["records"], record_id=f"{session_key}:{key}")


def per_session(frame: pl.DataFrame, condition: pl.Expr) -> dict:
    """{session_key: number of rows meeting condition}."""
    return dict(frame.filter(condition).group_by("session_key").len().iter_rows())


def who(row: dict) -> tuple:
    return row["author"], row["origin"]


def first_user_message(t: dict, session_key: str) -> dict:
    found = rows(t["records"], session_key=session_key, native_type="user", kind="message").sort("seq")
    assert found.height > 0, session_key
    return found.row(0, named=True)


def events(t: dict, session_key: str, field: str) -> list[tuple]:
    found = rows(t["session_events"], session_key=session_key, field=field).sort("seq")
    return list(zip(found["value"], found["title_source"], found["event_kind"]))


def line_status(t: dict, scenario: str, session_key: str, line: int) -> tuple:
    name = f"core/{scenario}/-home-user-deploy/{session_key}.jsonl"
    row = one(t["source_lines"], source_file=name, line=line)
    return row["status"], row["reason"], row["record_id"]


# =============================================================================================
# 1. Who wrote a message
# =============================================================================================

A = "1a000000"  # authors scenario uuids


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, ("human", "prompt")),  # origin.kind human
        (4, ("human", "steer")),  # queued_command attachment with origin.kind human
        (7, ("harness", "injected")),  # isMeta caveat
        (5, ("harness", "injected")),  # an attachment that is not a human queued command
        (10, ("harness", "injected")),  # origin.kind task-notification
        (12, ("harness", "injected")),  # task-notification, subkind scheduled-trigger
        (14, ("agent", "inter_session")),  # peer, from + name
        (16, ("agent", "inter_session")),  # peer, fromSession
    ],
    ids=["human", "queued-human", "is-meta", "other-attachment", "task-notification", "scheduled-trigger",
         "peer-address", "peer-session"],
)
def test_author_and_origin_follow_the_markers(authored, n, expected):
    assert who(record(authored, AUTHORS, uid(A, n))) == expected


def test_queued_command_of_a_person_stays_an_attachment_with_its_data(authored):
    row = record(authored, AUTHORS, uid(A, 4))
    assert (row["kind"], row["native_subtype"]) == ("attachment", "queued_command")
    part = one(authored["parts"], record_id=row["record_id"])
    assert part_native(authored, part)["prompt"] == "also update the README"


@pytest.mark.parametrize("n", [18, 20], ids=["coordinator", "observer"])
def test_coordinator_and_observer_messages_are_written_by_an_agent(authored, n):
    assert record(authored, AUTHORS, uid(A, n))["author"] == "agent"


def test_task_notification_sets_the_trigger(authored):
    assert record(authored, AUTHORS, uid(A, 10))["trigger_kind"] == "task_completion"
    assert record(authored, AUTHORS, uid(A, 12))["trigger_kind"] == "schedule"


def test_peer_message_names_its_sender_address(authored):
    row = record(authored, AUTHORS, uid(A, 14))
    assert (row["from_address"], row["from_name"], row["from_session_id"]) == (
        "uds:/tmp" + "/cc-socks/4041880.sock", "reviewer", None,  # the sender's socket as recorded
    )


def test_peer_message_names_its_sender_session(authored):
    row = record(authored, AUTHORS, uid(A, 16))
    assert row["from_session_id"] == METADATA
    assert (row["from_address"], row["from_name"]) == (None, None)


def test_only_peer_messages_name_a_sender(authored):
    named = rows(authored["records"], session_key=AUTHORS).filter(
        pl.col("from_session_id").is_not_null() | pl.col("from_address").is_not_null()
        | pl.col("from_name").is_not_null()
    )
    assert sorted(named["uuid"].to_list()) == [uid(A, 14), uid(A, 16)]


def test_channel_message_comes_via_channel(authored):
    assert record(authored, AUTHORS, uid(A, 22))["via"] == "channel"
    vias = rows(authored["records"], session_key=AUTHORS).filter(pl.col("via").is_not_null())
    assert vias["uuid"].to_list() == [uid(A, 22)]


def test_command_marker_is_a_command(authored):
    assert record(authored, AUTHORS, uid(A, 8))["origin"] == "command"


def test_local_command_output_is_written_by_the_harness(authored):
    assert record(authored, AUTHORS, uid(A, 9))["author"] == "harness"


@pytest.mark.parametrize("n", [24, 26], ids=["unclassified", "no-marker"])
def test_prompt_without_a_known_sender_has_no_author(authored, n):
    row = record(authored, AUTHORS, uid(A, n))
    assert (row["kind"], row["author"], row["origin"], row["trigger_kind"]) == ("message", None, None, None)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        # the entry identifies a launch prompt "by the sidecar toolUseId and the parent result's agentId":
        # one of the two alone does not (tests/mapping/test_departures.py has both together)
        ("a1c0ffee00000001", (None, None)),  # sidecar toolUseId only (the parent's result names no agentId)
        ("a2c0ffee00000002", (None, None)),  # parent's tool result names the agentId only (no sidecar toolUseId)
        ("a3c0ffee00000003", (None, None)),  # named by nothing: being first identifies no sender
    ],
    ids=["sidecar-tool-use-id", "parent-result-agent-id", "unlinked"],
)
def test_subagent_launch_prompt_needs_both_native_fields_the_entry_names(authored, agent, expected):
    row = first_user_message(authored, f"{LAUNCH}/{agent}")
    assert row["seq"] == 1
    assert who(row) == expected


def test_real_prompts_carry_no_human_author_without_origin(corpus):
    # no corpus version up to 2.1.114 writes origin.kind: a typed prompt has no marker, so no author
    assert rows(older(corpus["records"]), author="human").height == 0
    assert who(first_user_message(corpus, SNIFFLY)) == (None, None)


def test_real_command_echo_output_and_caveat(corpus):
    lines = rows(corpus["records"], session_key=MODEL_CMD, native_type="user").sort("seq")
    caveat, command, output = lines.rows(named=True)
    assert caveat["is_meta"] and who(caveat) == ("harness", "injected")
    assert json.loads(command["native"])["message"]["content"].startswith("<command-name>/model</command-name>")
    assert command["origin"] == "command"
    assert json.loads(output["native"])["message"]["content"].startswith("<local-command-stdout>")
    assert output["author"] == "harness"


def _agent_results(path: Path) -> dict[str, str]:
    """{agentId: tool_use_id} of the tool results in a transcript whose toolUseResult names an agentId."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line) if line.strip() else {}
        result = obj.get("toolUseResult")
        if isinstance(result, dict) and result.get("agentId"):
            found[result["agentId"]] = obj["message"]["content"][0]["tool_use_id"]
    return found


def test_real_subagents_named_by_the_parent_result_only_are_partial_lineage_without_author(corpus):
    # 2.1.114 sidecars hold agentType and description but no toolUseId: only the parent's result names
    # each agent, one of the two fields the registry entry requires together
    folder = CORPUS / "daaain-claude-code-log" / "-experiments-worktrees"
    results = _agent_results(folder / f"{WORKTREES}.jsonl")
    sidecars = {
        p.name[len("agent-"):-len(".meta.json")]: json.loads(p.read_text())
        for p in (folder / WORKTREES / "subagents").glob("*.meta.json")
    }
    assert len(sidecars) == 6 and all("toolUseId" not in s for s in sidecars.values())
    edges = rows(corpus["lineage"], relation="spawned_by").filter(pl.col("parent_session_key") == WORKTREES)
    got = {
        r["session_key"].split("/")[1]: (r["call_id"], r["role"], r["evidence"], r["evidence_detail"], r["scope"])
        for r in edges.iter_rows(named=True)
    }
    assert got == {
        agent: (results[agent], sidecar["agentType"], "native_field_partial", "tool_result.agentId", "subagent")
        for agent, sidecar in sidecars.items()
    }
    for agent in sidecars:
        key = f"{WORKTREES}/{agent}"
        # the launch prompt is not identified as the entry requires: no author
        assert who(first_user_message(corpus, key)) == (None, None), key
        loss = one(corpus["losses"], session_key=key, category="lineage")
        assert "native_field_partial" in loss["detail"]


def test_real_orphan_subagent_first_prompt_has_no_author(corpus):
    # its parent transcript and sidecar are absent: no native field names the launch
    assert who(first_user_message(corpus, ORPHAN_AGENT)) == (None, None)


def test_real_attachments_are_injected_by_the_harness(corpus):
    attachments = rows(corpus["records"], session_key=WORKTREES, native_type="attachment")
    plain = attachments.filter(pl.col("kind") == "attachment")
    assert sorted(plain["native_subtype"].to_list()) == ["deferred_tools_delta", "skill_listing", "task_reminder"]
    assert set(zip(attachments["author"], attachments["origin"])) == {("harness", "injected"), ("hook", "injected")}


# =============================================================================================
# 2. Triggers
# =============================================================================================

T = "3a000000"  # triggers scenario uuids: the prompt of turn k is line 2k-1


def trigger(row: dict) -> tuple:
    return row["trigger_kind"], row["trigger_native"], row["trigger_id"], row["trigger_run_id"], row["trigger_reason"]


def test_scheduled_turn_carries_task_fire_and_reason(authored):
    row = record(authored, TRIGGERS, uid(T, 3))
    assert trigger(row) == ("schedule", "scheduled", "926a7a84", "41d141b3-0e28-454f-9946-b7093d045570", "cron")
    assert (row["is_meta"], row["prompt_source"]) == (True, "system")
    assert who(row) == ("harness", "injected")


@pytest.mark.parametrize(
    ("n", "kind", "native"),
    [
        (3, "schedule", "scheduled"),
        (5, "task_completion", "task_notification"),
        (7, "auto_continuation", "auto_continuation"),
        (9, "peer", "peer"),
    ],
)
def test_turn_origin_maps_to_the_trigger_kind(authored, n, kind, native):
    row = record(authored, TRIGGERS, uid(T, n))
    assert (row["trigger_kind"], row["trigger_native"]) == (kind, native)


@pytest.mark.parametrize(
    ("n", "turn_origin"),
    [(1, "user"), (11, "sdk"), (13, "human")],
    ids=["typed-2.1.280-user", "sdk", "human"],
)
def test_human_and_sdk_turns_get_no_trigger(authored, n, turn_origin):
    row = record(authored, TRIGGERS, uid(T, n))
    assert json.loads(row["native"])["turnOrigin"] == turn_origin
    assert row["author"] == "human"
    assert trigger(row) == (None, None, None, None, None)


def test_scheduled_trigger_notification_is_a_schedule_whatever_its_turn_origin(authored):
    # origin.subkind scheduled-trigger: "the turn's trigger is ... schedule" (registry, Who wrote a message)
    row = record(authored, TRIGGERS, uid(T, 15))
    assert json.loads(row["native"])["turnOrigin"] == "task_notification"
    assert row["trigger_kind"] == "schedule"


def test_only_prompts_carry_triggers(authored):
    carried = rows(authored["records"], session_key=TRIGGERS).filter(pl.col("trigger_kind").is_not_null())
    assert set(carried["native_type"]) == {"user"}
    assert carried.height == 5


def test_real_transcripts_carry_no_trigger(corpus):
    # no turnOrigin, origin or scheduled fields up to 2.1.114: nothing to map
    triggered = older(corpus["records"]).filter(
        pl.col("trigger_kind").is_not_null() | pl.col("trigger_native").is_not_null()
        | pl.col("trigger_id").is_not_null()
    )
    assert triggered.height == 0


# =============================================================================================
# 3. Repeated metadata
# =============================================================================================


def test_repeated_metadata_gives_one_event_per_change(authored):
    counts = dict(rows(authored["session_events"], session_key=METADATA).group_by("field").len().iter_rows())
    assert counts == {
        "mode": 1, "permission_mode": 2, "title": 4, "last_prompt": 2, "agent_name": 1, "tag": 1, "pr_link": 1,
    }


@pytest.mark.parametrize(
    ("line", "set_by"),
    [
        (7, 1), (8, 2), (9, 5), (10, 6),  # mode, permission-mode, ai-title, last-prompt re-written at exit
        (20, 1), (22, 15), (23, 16), (24, 17), (25, 18), (27, 19),  # the next exit
        # permission-mode lines repeating the mode the prompt of line 11 set fold into that prompt
        (13, uid("4a000000", 3)), (21, uid("4a000000", 3)),
    ],
)
def test_repeated_line_is_a_duplicate_folded_into_the_line_that_set_the_value(authored, line, set_by):
    key = set_by if isinstance(set_by, str) else f"line:{set_by}"
    assert line_status(authored, "metadata", METADATA, line) == (
        "duplicate", "unchanged_value", f"{METADATA}:{key}",
    )


def test_pr_link_written_again_with_a_new_time_is_no_change(authored):
    assert events(authored, METADATA, "pr_link") == [("https://github.com/acme/deploy/pull/57", None, "session_info")]
    assert line_status(authored, "metadata", METADATA, 22)[0] == "duplicate"


def test_model_title_that_changes_back_gives_three_events(authored):
    model = [(v, s) for v, s, _ in events(authored, METADATA, "title") if s == "model"]
    assert model == [("Fix flaky deploy test", "model"), ("Deploy script dry-run", "model"),
                     ("Fix flaky deploy test", "model")]


def test_custom_title_is_a_user_title_and_wins_over_a_later_model_title(authored):
    assert ("deploy-fixer", "user", "session_info") in events(authored, METADATA, "title")
    session = one(authored["sessions"], session_key=METADATA)
    assert (session["title"], session["title_source"]) == ("deploy-fixer", "user")


def test_permission_mode_lines_and_prompt_modes_are_one_config_sequence(authored):
    assert events(authored, METADATA, "permission_mode") == [
        ("default", None, "config_change"), ("acceptEdits", None, "config_change"),
    ]
    found = rows(authored["session_events"], session_key=METADATA, field="permission_mode").sort("seq")
    # the first from a permission-mode line, the change from a prompt's permissionMode
    assert found["native_type"].to_list() == ["permission-mode", "user"]
    # the permission-mode line written after that prompt repeats its value: no change, so no record
    # of its own (registry entry, Repeated metadata: compared with the value whichever line set it)
    assert rows(authored["records"], session_key=METADATA, position="line:13").height == 0


def test_mode_line_is_a_config_change(authored):
    assert events(authored, METADATA, "mode") == [("normal", None, "config_change")]


def test_permission_mode_that_changes_back_is_a_change(authored):
    # permission-mode default, a prompt in plan, permission-mode default again: three values, three changes
    assert [v for v, _, _ in events(authored, MODE_BACK, "permission_mode")] == ["default", "plan", "default"]


def test_entrypoint_is_the_client_name(authored, corpus):
    assert one(authored["sessions"], session_key=METADATA)["client_name"] == "cli"
    assert record(authored, METADATA, uid("4a000000", 1))["entrypoint"] == "cli"
    assert one(corpus["sessions"], session_key=WORKTREES)["client_name"] == "cli"  # 2.1.114
    assert one(corpus["sessions"], session_key=SNIFFLY)["client_name"] is None  # 1.0.17 writes no entrypoint


def test_real_repeated_permission_mode_and_last_prompt(corpus):
    assert events(corpus, WORKTREES, "permission_mode") == [("acceptEdits", None, "config_change")]
    assert len(events(corpus, WORKTREES, "last_prompt")) == 2
    name = f"corpus/daaain-claude-code-log/-experiments-worktrees/{WORKTREES}.jsonl"
    dup = rows(corpus["source_lines"], source_file=name, status="duplicate")
    assert set(dup["reason"]) == {"unchanged_value"}
    by_record = dict(dup.group_by("record_id").len().iter_rows())
    # 8 permission-mode lines fold into line 1; 7 last-prompt lines with two values fold into lines 38 and 138
    assert by_record == {f"{WORKTREES}:line:1": 7, f"{WORKTREES}:line:38": 3, f"{WORKTREES}:line:138": 2}


# =============================================================================================
# 4. Tools
# =============================================================================================


@pytest.mark.parametrize(
    ("name", "kind"),
    [*KIND_BY_NAME.items(), ("TodoWrite", "other"), ("mcp__github__create_issue", "other")],
)
def test_tool_kind_by_name(authored, name, kind):
    call = one(authored["tool_calls"], session_key=TOOLS, tool_name=name, requested_by="model")
    assert call["tool_kind"] == kind
    assert call["status"] == "completed"


def test_tool_use_blocks_are_requested_by_the_model(authored):
    calls = rows(authored["tool_calls"], session_key=TOOLS)
    model = calls.filter(pl.col("call_id").str.starts_with("toolu_"))
    assert model.height == 13
    assert set(model["requested_by"]) == {"model"}


def test_mcp_tool_is_an_mcp_provider_call(authored):
    calls = rows(authored["tool_calls"], session_key=TOOLS)
    mcp = one(calls, tool_name="mcp__github__create_issue")
    assert (mcp["provider_kind"], mcp["mcp_server"]) == ("mcp", "github")
    others = calls.filter(pl.col("tool_name") != "mcp__github__create_issue")
    assert others.select(pl.col("provider_kind").is_null().all(), pl.col("mcp_server").is_null().all()).row(0) == (
        True, True,
    )


def test_mcp_attribution_stays_on_the_inference(authored):
    inference = one(authored["inferences"], inference_id="msg_01ToolsAttributed000001")
    assert (inference["attributed_mcp_server"], inference["attributed_mcp_tool"]) == ("github", "create_issue")
    attributed = authored["inferences"].filter(pl.col("attributed_mcp_server").is_not_null())
    assert attributed["inference_id"].to_list() == ["msg_01ToolsAttributed000001"]


def test_user_shell_command_is_a_bash_call_requested_by_the_user(authored):
    shell_input, shell_output = uid("5a000000", 29), uid("5a000000", 30)
    call = one(authored["tool_calls"], session_key=TOOLS, requested_by="user")
    assert call["call_id"] == shell_input
    assert (call["tool_name"], call["tool_kind"], call["status"]) == ("Bash", "execute", "completed")
    assert json.loads(call["input"]) == {"command": "ls -la scripts"}
    assert (call["call_record_id"], call["result_record_id"]) == (f"{TOOLS}:{shell_input}", f"{TOOLS}:{shell_output}")
    assert json.loads(call["result_native"]) == {
        "stdout": "total 8\n-rwxr-xr-x 1 user user 512 deploy.sh", "stderr": "",
    }
    assert record(authored, TOOLS, shell_output)["kind"] == "tool_result"


@pytest.mark.parametrize("version", sorted(SHELL_SESSIONS))
def test_real_user_shell_commands(corpus, version):
    session, input_uuid, command = SHELL_SESSIONS[version]
    call = one(corpus["tool_calls"], session_key=session, requested_by="user")
    assert call["call_id"] == input_uuid
    assert (call["tool_name"], call["tool_kind"]) == ("Bash", "execute")
    assert json.loads(call["input"]) == {"command": command}
    assert json.loads(call["result_native"])["stdout"]
    assert record(corpus, session, input_uuid)["version"] == version


def test_real_user_shell_commands_are_the_only_user_requested_calls(corpus):
    user_calls = rows(older(corpus["tool_calls"]), requested_by="user")
    assert sorted(user_calls["session_key"]) == sorted(s for s, _, _ in SHELL_SESSIONS.values())
    model_calls = corpus["tool_calls"].filter(pl.col("requested_by") == "model")
    assert model_calls.filter(~pl.col("call_id").str.starts_with("toolu_")).height == 0


def test_real_tool_kinds_follow_the_name(corpus):
    calls = corpus["tool_calls"].select("tool_name", "tool_kind").unique()
    assert calls.height > 20
    for name, kind in calls.iter_rows():
        assert kind == KIND_BY_NAME.get(name, "other"), name


# =============================================================================================
# 5. Approvals
# =============================================================================================


@pytest.mark.parametrize(
    ("case", "status", "denial_kind", "permission", "decided_by", "evidence"),
    [
        ("AcceptTemporary", "completed", None, "allow_once", "user", "native_field"),
        ("AcceptPermanent", "completed", None, "allow_always", "user", "native_field"),
        ("AcceptConfig000", "completed", None, "allow_once", "policy", "native_field"),
        ("AcceptHook00000", "completed", None, "allow_once", "hook", "native_field"),
        # its text is the rejection's too: the fields are read, not the text
        ("RejectUser00000", "denied", "user-rejected", "reject_once", "user", "native_field"),
        ("RejectClassify0", "denied", "automode-blocked", "reject_once", "classifier", "native_field"),
        ("RejectHook00000", "denied", "permission-rule", "reject_once", "hook", "native_field"),
        ("AbortCancelled0", "cancelled", "cancelled", "reject_once", "user", "native_field"),
        ("Interrupted0000", "interrupted", "interrupted", None, None, "native_field"),
        ("NoDecision00000", "completed", None, None, None, None),
    ],
)
def test_approval_decision_and_denial_on_the_result(authored, case, status, denial_kind, permission, decided_by,
                                                    evidence):
    call = one(authored["tool_calls"], call_id=f"toolu_01Approve{case}")
    assert (call["status"], call["denial_kind"], call["permission"], call["permission_decided_by"],
            call["permission_evidence"], call["denial_reason"]) == (
        status, denial_kind, permission, decided_by, evidence, None,
    )
    result = one(authored["records"], record_id=call["result_record_id"])
    assert result["session_key"] == APPROVALS
    decision = json.loads(result["native"]).get("permissionDecision")
    if decision is None:
        assert call["permission_native"] is None
    else:
        assert {k: v for k, v in json.loads(call["permission_native"]).items() if v is not None} == decision


# =============================================================================================
# 6. Queue: remove withdraws the queued message
# =============================================================================================


def test_queue_remove_withdraws_the_latest_earlier_enqueue_of_its_content(authored):
    queue = rows(authored["records"], session_key=QUEUE, native_type="queue-operation").sort("seq")
    enqueued = queue.filter(pl.col("native_subtype") == "enqueue")
    got = [(json.loads(n).get("content"), s) for n, s in zip(enqueued["native"], enqueued["status"])]
    assert got == [
        ("run the linter too", None),  # dequeued, never removed
        ("check again", None),
        ("and the docs", "withdrawn"),  # remove without content: the latest queued message
        ("deploy to staging", "withdrawn"),  # remove naming its content
        ("deploy to prod", None),
        ("retry", None),
        ("retry", "withdrawn"),  # the same text twice: only the latest earlier one
    ]
    assert set(rows(authored["records"], status="withdrawn")["native_subtype"]) == {"enqueue"}


def test_real_queue_remove_withdraws_the_queued_message(corpus):
    withdrawn = rows(older(corpus["records"]), status="withdrawn").sort("session_key", "seq")
    assert list(zip(withdrawn["session_key"], withdrawn["position"])) == [
        (SPOTTER_AUTO, "line:497"), (SPOTTER_AUTO, "line:603"), (SPOTTER_HEAVY, "line:9"),
    ]
    contents = [json.loads(n)["content"] for n in withdrawn["native"]]
    assert contents == ["check again", "new beads for the epic were added. tackle them", "/mcp"]
    # dequeued messages are never withdrawn
    assert rows(corpus["records"], session_key=JSSOUND, status="withdrawn").height == 0


# =============================================================================================
# 7. Structured attachments and persisted outputs
# =============================================================================================

ATT = "8a000000"


def data_part(t: dict, key: str) -> dict:
    return one(t["parts"], record_id=key, part_type="data")


def test_every_part_names_its_block_in_the_verbatim_json_of_its_line(corpus_out: Path):
    # the query of docs/asr-tables.md "Exact JSON": each block is found once, and is the block the part types
    con = duckdb.connect()
    for name in ("parts", "records", "source_lines"):
        con.execute(f"create view {name} as select * from read_parquet('{corpus_out / name}/*.parquet')")
    blocks = con.sql("""
        with objects as (
            select l.source_file, l.line, l.sub, coalesce(l.native, r.native) as json
            from source_lines as l
            left join records as r on r.record_id = l.record_id and l.native is null
            where l.status in ('mapped', 'folded', 'recovered')
        )
        select p.record_id, p.part_index, p.part_type, p.text, json_extract(o.json, p.native_path) as block
        from parts as p
        join objects as o
            on o.source_file = p.source_file and o.line = p.source_line and o.sub is not distinct from p.source_sub
    """).pl()
    parts = con.sql("select count(*) from parts").fetchall()[0][0]
    assert blocks.height == parts == blocks.select("record_id", "part_index").n_unique()
    assert blocks["block"].null_count() == 0
    typed = blocks.filter(pl.col("block").str.starts_with("{") & (pl.col("part_type") != "data"))
    assert (typed["block"].str.json_path_match("$.type") == typed["part_type"]).all()
    strings = blocks.filter(pl.col("block").str.starts_with('"'))  # a string content read as one text block
    assert strings.height > 0
    assert (strings["block"].str.json_decode(pl.String) == strings["text"]).all()


def test_structured_attachment_is_a_complete_data_part_with_its_rendered_text(authored):
    part = data_part(authored, f"{ATTACHMENTS}:{uid(ATT, 1)}")
    assert part["schema"] == "com.anthropic.claude-code/attachment/selected_lines_in_ide"
    assert part["capture_state"] == "complete"
    native = json.loads(record(authored, ATTACHMENTS, uid(ATT, 1))["native"])
    assert part_native(authored, part) == native["attachment"]
    assert json.loads(part["display_content"]) == native["rendered"]


def test_attachment_holding_only_its_type_is_empty(authored):
    part = data_part(authored, f"{ATTACHMENTS}:{uid(ATT, 2)}")
    assert (part["schema"], part["capture_state"]) == ("com.anthropic.claude-code/attachment/plan_mode_exit", "empty")
    assert part["display_content"] is None


def test_attachment_without_rendered_text_is_still_complete(authored):
    part = data_part(authored, f"{AUTHORS}:{uid(A, 5)}")
    assert (part["capture_state"], part["display_content"]) == ("complete", None)


@pytest.mark.parametrize(
    ("n", "call_id", "state"),
    [(6, "toolu_01PersistedKept000001", "external"), (7, "toolu_01PersistedGone000001", "truncated")],
)
def test_persisted_tool_output_is_external_when_its_file_is_there(authored, n, call_id, state):
    part = one(authored["parts"], record_id=f"{ATTACHMENTS}:{uid(ATT, n)}")
    assert (part["part_type"], part["call_id"]) == ("tool_result", call_id)
    assert (part["persisted_file"], part["capture_state"]) == (f"{call_id}.txt", state)


def test_persisted_output_whose_file_is_gone_is_a_loss(authored):
    loss = one(authored["losses"], session_key=ATTACHMENTS, category="tool_output_truncated")
    assert loss["count"] == 1
    assert rows(authored["losses"], category="tool_output_truncated").height == 1
    # the manifest lists it as absent; deleted_by_retention is a possible cause, never claimed
    truncated = one(authored["parts"], capture_state="truncated")
    record = one(authored["records"], record_id=truncated["record_id"])
    absent = [a for a in authored["manifest"]["export_report"]["retention"]["absent_files"]
              if a["kind"] == "tool_result_file"]
    assert absent == [{
        "kind": "tool_result_file", "name": truncated["persisted_file"], "session_key": ATTACHMENTS,
        "referenced_by": {"path": record["source_file"], "position": record["position"]},
        "status": "absent", "possible_causes": ["deleted_by_retention", "not_copied", "removed"],
    }]


def test_ordinary_blocks_are_complete(authored):
    states = authored["parts"].filter(pl.col("persisted_file").is_null() & (pl.col("part_type") != "data"))
    assert set(states["capture_state"]) == {"complete"}


def test_real_attachments_are_data_parts(corpus):
    keys = rows(corpus["records"], session_key=WORKTREES, native_type="attachment")
    parts = rows(corpus["parts"], part_type="data").join(keys.select("record_id", "native_subtype"), on="record_id")
    # one data part per attachment record (hook_additional_context also has its text as text parts)
    assert parts.height == keys.height == 49
    assert parts["record_id"].n_unique() == 49
    assert (parts["schema"] == "com.anthropic.claude-code/attachment/" + parts["native_subtype"]).all()
    assert set(parts["capture_state"]) == {"complete"}


# =============================================================================================
# 8. Usage
# =============================================================================================


def cache_writes(inference: dict) -> tuple:
    return inference["cache_write_tokens"], inference["cache_write_5m_tokens"], inference["cache_write_1h_tokens"]


def test_cache_split_is_kept_beside_a_disagreeing_aggregate(authored):
    inference = one(authored["inferences"], inference_id="msg_01Usage00000000000001")
    assert cache_writes(inference) == (0, 500, 0)
    assert inference["service_tier"] == "priority"


def test_missing_cache_split_is_not_reported(authored):
    inference = one(authored["inferences"], inference_id="msg_01Usage00000000000002")
    assert inference["cache_write_tokens"] == 300
    assert (inference["cache_write_5m_tokens"], inference["cache_write_1h_tokens"]) == (None, None)
    assert inference["service_tier"] == "standard"


def test_synthetic_api_error_is_a_failed_attempt_without_inference(authored):
    error = one(authored["records"], session_key=USAGE, message_id="553e41ca-ada2-45af-8c8f-b2711b3dfe1f")
    assert (error["kind"], error["is_api_error"], error["inference_id"]) == ("message", True, None)
    assert error["author"] == "harness"
    assert rows(authored["inference_observations"], inference_id="553e41ca-ada2-45af-8c8f-b2711b3dfe1f").height == 0
    assert rows(authored["inferences"], session_key=USAGE)["inference_id"].to_list() == [
        "msg_01Usage00000000000001", "msg_01Usage00000000000002", "msg_01Usage00000000000003",
    ]


def test_response_without_stop_reason_is_incomplete_usage(authored):
    inference = one(authored["inferences"], inference_id="msg_01Usage00000000000003")
    assert (inference["usage_complete"], inference["stop_reason"], inference["output_total_tokens"]) == (False, None, 4)


@pytest.mark.parametrize("session", sorted(SYNTHETIC_ERRORS))
def test_real_synthetic_api_errors_are_not_inferences(corpus, session):
    message_id = SYNTHETIC_ERRORS[session]
    error = one(corpus["records"], session_key=session, message_id=message_id)
    assert (error["is_api_error"], error["inference_id"], error["model"]) == (True, None, "<synthetic>")
    assert rows(corpus["inference_observations"], inference_id=message_id).height == 0


def test_real_usage_keeps_tier_and_cache_split(corpus):
    inference = one(corpus["inferences"], inference_id="msg_01XwTPVdM5y8bf1EDKvGBV35")  # A.2 of the format notes
    assert cache_writes(inference) == (27860, 0, 27860)
    assert set(corpus["inferences"]["service_tier"]) == {"standard"}
    # 1.0.17 usage has no cache_creation object: the split is null, never 0
    sniffly = rows(corpus["inferences"], session_key=SNIFFLY)
    assert sniffly.height > 0
    assert sniffly.select(pl.col("cache_write_5m_tokens").is_null().all()).item()


# =============================================================================================
# 9. Lineage and tree
# =============================================================================================

LIN = "aa000000"
TR = "ac000000"


def test_forked_records_name_the_record_they_copy(authored):
    copies = rows(authored["records"], session_key=FORK).filter(pl.col("copied_from_session_id").is_not_null())
    assert list(zip(copies["uuid"], copies["copied_from_session_id"], copies["copied_from_uuid"])) == [
        (uid(LIN, 1), FORK_PARENT, uid(LIN, 1)), (uid(LIN, 2), FORK_PARENT, uid(LIN, 2)),
    ]
    assert record(authored, FORK, uid(LIN, 11))["copied_from_session_id"] is None


def test_fork_is_forked_from_its_parent_session(authored):
    edge = one(authored["lineage"], session_key=FORK)
    assert (edge["relation"], edge["parent_session_key"], edge["evidence"]) == (
        "forked_from", FORK_PARENT, "native_field",
    )
    session = one(authored["sessions"], session_key=FORK)
    assert session["forked_from_session_id"] == FORK_PARENT
    assert (session["title"], session["title_source"]) == ("release checklist (fork)", "user")
    # a fork is a main session of its own: its root is itself, its first prompt the first it did not copy
    assert (session["parent_session_key"], session["root_session_key"]) == (None, FORK)
    path = REGISTRY / "lineage" / "-home-user-deploy" / f"{FORK}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    own = next(o for o in lines if o.get("type") == "user" and "forkedFrom" not in o)
    assert (session["first_prompt"], session["first_prompt_record_id"]) == (
        own["message"]["content"], f"{FORK}:{own['uuid']}")


def test_fork_context_ref_means_a_referenced_prefix(authored):
    session = one(authored["sessions"], session_key=FORK_AGENT)
    assert (session["inherits_mode"], session["inherits_session_id"], session["inherits_last_uuid"]) == (
        "referenced", TREE, uid(TR, 6),
    )
    edge = one(authored["lineage"], session_key=FORK_AGENT, relation="inherits")
    assert (edge["parent_session_key"], edge["evidence"], edge["evidence_detail"]) == (
        TREE, "native_field", "fork-context-ref",
    )
    # the forked subagent is still spawned by its call, and rolls up to the session that spawned it
    spawned = one(authored["lineage"], session_key=FORK_AGENT, relation="spawned_by")
    assert spawned["call_id"] == "toolu_01LineageForkAgent0001"
    assert one(authored["sessions"], session_key=FORK_AGENT)["root_session_key"] == TREE


def test_continued_in_names_the_successor(authored):
    assert one(authored["sessions"], session_key=TREE)["continued_in_session_id"] == SUCCESSOR
    assert events(authored, TREE, "continued_in") == [(SUCCESSOR, None, "session_info")]


def test_compact_boundary_has_a_logical_parent(authored):
    boundary = record(authored, TREE, uid(TR, 3))
    assert (boundary["kind"], boundary["parent_record_id"]) == ("compaction", None)
    assert boundary["logical_parent_record_id"] == f"{TREE}:msg:msg_01LineageTree00000001"


def test_active_leaf_is_the_latest_last_prompt_leaf(authored):
    session = one(authored["sessions"], session_key=TREE)
    assert session["active_leaf_uuid"] == uid(TR, 8)
    assert session["active_leaf_record_id"] == f"{TREE}:msg:msg_01LineageTree00000003"


def test_main_sessions_claim_no_parent(authored):
    mains = rows(authored["sessions"], stream_kind="main")
    assert {FORK, FORK_PARENT, TREE} <= set(mains["session_key"])
    assert mains.select(pl.col("parent_session_key").is_null().all()).item()
    assert SUCCESSOR not in set(authored["sessions"]["session_key"])


def test_real_compact_boundaries_have_logical_parents(corpus):
    boundaries = rows(corpus["records"], native_subtype="compact_boundary").sort("session_key")
    assert older(boundaries)["session_key"].to_list() == [SPOTTER_AUTO, SPOTTER_MANUAL, FASTHOOKS]
    # and every boundary line of the newer sessions, counted from the files
    expected = sum(
        sum(1 for line in path.read_text().splitlines() if '"subtype":"compact_boundary"' in line)
        for path in NEW_CORPUS.rglob("*.jsonl")
    )
    assert boundaries.height - 3 == expected > 0
    for row in boundaries.iter_rows(named=True):
        # records.native holds the compact summary folded into the boundary (ASR-373): read the boundary line
        line = (CORPUS.parent / row["source_file"]).read_text().splitlines()[row["source_line"] - 1]
        boundary = json.loads(line)
        assert (boundary["subtype"], boundary["parentUuid"]) == ("compact_boundary", None)
        assert row["parent_record_id"] is None
        parent = one(corpus["records"], record_id=row["logical_parent_record_id"])
        assert parent["uuid"] == boundary["logicalParentUuid"], row["record_id"]


def test_real_main_sessions_claim_no_parent(corpus):
    mains = rows(corpus["sessions"], stream_kind="main")
    assert mains.height > 30
    assert mains.select(pl.col("parent_session_key").is_null().all()).item()


# =============================================================================================
# 10. agent_progress copies
# =============================================================================================

AGENT_ABSENT = f"{PROGRESS_ABSENT}/a5eb10a"
AGENT_PRESENT = f"{PROGRESS_PRESENT}/a5eb20a"


def test_absent_subagent_is_rebuilt_from_progress_copies(authored):
    session = one(authored["sessions"], session_key=AGENT_ABSENT)
    assert (session["stream_kind"], session["rebuilt_from"], session["parent_session_key"]) == (
        "subagent", "agent_progress", PROGRESS_ABSENT,
    )
    rebuilt = rows(authored["records"], session_key=AGENT_ABSENT).sort("seq")
    assert rebuilt["kind"].to_list() == ["message", "message", "tool_result", "message"]
    assert set(rebuilt["record_source"]) == {"agent_progress"}
    assert rebuilt["position"].to_list() == [f"agent_progress:line:{n}" for n in (3, 4, 5, 6)]
    assert one(authored["losses"], session_key=AGENT_ABSENT, category="subagent_transcript_absent")


def test_rebuilt_usage_says_where_it_came_from(authored):
    usage = rows(authored["inferences"], session_key=AGENT_ABSENT).sort("inference_id")
    assert list(zip(usage["inference_id"], usage["usage_source"], usage["usage_complete"])) == [
        ("msg_01ProgressSub10001", "agent_progress", False),  # the copy holds a streaming placeholder
        ("msg_01ProgressSub10002", "agent_progress", True),
    ]
    assert one(authored["losses"], session_key=AGENT_ABSENT, category="usage_incomplete")["count"] == 1


def test_present_subagent_is_not_rebuilt_and_progress_records_point_at_its_records(authored):
    assert one(authored["sessions"], session_key=AGENT_PRESENT)["rebuilt_from"] is None
    assert set(rows(authored["records"], session_key=AGENT_PRESENT)["record_source"]) == {"transcript"}
    assert rows(authored["losses"], session_key=AGENT_PRESENT, category="subagent_transcript_absent").height == 0
    progress = rows(authored["records"], session_key=PROGRESS_PRESENT, native_subtype="agent_progress").sort("seq")
    assert progress["copy_of_record_id"].to_list() == [
        f"{AGENT_PRESENT}:b2100000-0000-4000-8000-000000000001", f"{AGENT_PRESENT}:msg:msg_01ProgressSub20001",
        f"{AGENT_PRESENT}:b2100000-0000-4000-8000-000000000003", f"{AGENT_PRESENT}:msg:msg_01ProgressSub20002",
    ]


def test_progress_copies_are_not_counted_twice(authored):
    for inference_id in ("msg_01ProgressSub20001", "msg_01ProgressSub20002"):
        inference = one(authored["inferences"], inference_id=inference_id)
        assert (inference["session_key"], inference["usage_source"], inference["observation_count"]) == (
            AGENT_PRESENT, "transcript", 1,
        )
    # the subagent file's final usage, not the copy's placeholder
    assert one(authored["inferences"], inference_id="msg_01ProgressSub20001")["output_total_tokens"] == 96
    assert rows(authored["inferences"], session_key=PROGRESS_PRESENT).height == 2


def test_real_absent_subagent_is_rebuilt(corpus):
    child = f"{SPOTTER_SUB}/afb92ff"
    session = one(corpus["sessions"], session_key=child)
    assert (session["rebuilt_from"], session["parent_session_key"]) == ("agent_progress", SPOTTER_SUB)
    assert set(rows(corpus["records"], session_key=child)["record_source"]) == {"agent_progress"}
    usage = rows(corpus["inferences"], session_key=child)
    assert usage.height > 0 and set(usage["usage_source"]) == {"agent_progress"}
    assert one(corpus["losses"], session_key=child, category="subagent_transcript_absent")
    assert set(rows(corpus["sessions"], rebuilt_from="agent_progress")["session_key"]) == {child}


def test_real_present_subagent_is_linked_not_rebuilt(corpus):
    child = f"{SPOTTER_MANUAL}/aac57f5"
    assert one(corpus["sessions"], session_key=child)["rebuilt_from"] is None
    progress = rows(corpus["records"], session_key=SPOTTER_MANUAL, native_subtype="agent_progress")
    assert progress.height > 0
    links = progress["copy_of_record_id"].drop_nulls()
    assert links.len() == progress.height
    assert links.str.starts_with(f"{child}:").all()
    usage = rows(corpus["inferences"], session_key=child)
    assert usage.height > 0
    assert set(usage["usage_source"]) == {"transcript"}
    assert set(usage["observation_count"]) == {1}


# =============================================================================================
# 11. Unknown record and attachment types
# =============================================================================================

UK = "ca000000"


def test_unknown_record_type_is_kept_as_unknown(authored):
    row = record(authored, UNKNOWN, "line:3")
    assert (row["kind"], row["native_type"]) == ("unknown", "frame-link")
    assert json.loads(row["native"])["frameId"] == "frm_7Q2"


def test_unknown_attachment_type_is_an_attachment_with_its_data(authored):
    row = record(authored, UNKNOWN, uid(UK, 3))
    assert (row["kind"], row["native_subtype"]) == ("attachment", "brand_new_thing")
    part = data_part(authored, row["record_id"])
    assert part["schema"] == "com.anthropic.claude-code/attachment/brand_new_thing"
    assert part_native(authored, part)["payload"] == {"level": 3, "tags": ["x"]}


def test_unknown_system_subtype_is_kept_as_unknown(authored):
    row = record(authored, UNKNOWN, uid(UK, 4))
    assert (row["kind"], row["native_subtype"]) == ("unknown", "mystery")
    assert json.loads(row["native"])["mysteryMetadata"] == {"count": 2}


def test_unknown_types_are_not_fatal(authored):
    lines = rows(authored["source_lines"], session_key=UNKNOWN)
    assert lines.height == 7 and set(lines["status"]) == {"mapped"}
    assert rows(authored["records"], session_key=UNKNOWN)["seq"].to_list() == [1, 2, 3, 4, 5, 6, 7]


# =============================================================================================
# 12. Unassigned facts
# =============================================================================================


def test_summary_of_another_sessions_leaf_is_unassigned(authored):
    unassigned = authored["manifest"]["_meta"]["com.anthropic.claude-code/unassigned"]
    path = f"core/summaries/-home-user-deploy/{SUMMARIES}.jsonl"
    assert unassigned == [
        {
            "kind": "session_info",
            "field": "title",
            "value": "Kubernetes Ingress Debugging Session",
            "references": {"leafUuid": "e3b0c442-98fc-4c14-9afb-f4c8996fb924"},
            "source": {"path": path, "position": "line:1"},
        },
        {
            "kind": "session_info",
            "field": "title",
            "value": "Release Notes Drafting",
            "references": {"leafUuid": "9f86d081-884c-4d63-9a2f-a8ef1c5e8d31"},
            "source": {"path": path, "position": "line:5"},
        },
    ]
    values = set(authored["session_events"]["value"].drop_nulls())
    assert not values & {"Kubernetes Ingress Debugging Session", "Release Notes Drafting"}
    # the lines still have records (file accounting), of kind session_info
    assert record(authored, SUMMARIES, "line:5")["kind"] == "session_info"
    assert "unassigned_facts" in authored["manifest"]["export_report"]


def test_summary_of_the_files_own_leaf_is_its_title(authored):
    # not the newest summary line (line 5 describes another session), the newest of its own leaves
    session = one(authored["sessions"], session_key=SUMMARIES)
    assert (session["title"], session["title_source"]) == ("Deploy Script Quoting Review", "summary")
    assert events(authored, SUMMARIES, "title") == [("Deploy Script Quoting Review", "summary", "session_info")]


def test_real_own_leaf_summaries_are_titles_and_foreign_ones_unassigned(corpus):
    session = one(corpus["sessions"], session_key=PHANTOM_SUMMARIES)
    assert (session["title"], session["title_source"]) == ("WPD Analysis: Telemetry Framework Design Gaps", "summary")
    unassigned = corpus["manifest"]["_meta"]["com.anthropic.claude-code/unassigned"]
    spam = [f for f in unassigned if SUMMARY_SPAM in f["source"]["path"]]
    assert len(spam) > 400
    assert one(corpus["sessions"], session_key=SUMMARY_SPAM)["title"] is None


# =============================================================================================
# 13. Losses
# =============================================================================================


def test_every_stream_has_a_model_rendering_loss(authored):
    keys = set(authored["sessions"]["session_key"])
    assert set(rows(authored["losses"], category="model_rendering")["session_key"]) == keys


def test_usage_incomplete_counts_responses_without_stop_reason(authored):
    losses = dict(rows(authored["losses"], category="usage_incomplete").select("session_key", "count").iter_rows())
    incomplete = per_session(authored["inferences"], ~pl.col("usage_complete"))
    assert losses == incomplete == {USAGE: 1, AGENT_ABSENT: 1}


def test_shell_exit_code_loss_for_streams_with_shell_calls(authored):
    losses = dict(rows(authored["losses"], category="shell_exit_code").select("session_key", "count").iter_rows())
    assert losses[TOOLS] == 3  # Bash, PowerShell and the user's `!` command
    shell = per_session(authored["tool_calls"], pl.col("tool_kind") == "execute")
    assert losses == shell
    assert QUEUE not in losses


def _independent_loss_counts() -> tuple[set[str], dict[str, int], dict[str, int]]:
    """Read line by line, without the converter: the sessionIds of the corpus, and per sessionId (a main
    session with its subagents and sidechains) the responses whose latest line has no stop reason and
    the shell calls without a recorded exit code."""
    files = sorted(CORPUS.rglob("*.jsonl"))
    agent_files = {p.name[len("agent-"):-len(".jsonl")] for p in files if p.name.startswith("agent-")}
    stops: dict[tuple[str, str, str], object] = {}  # (sessionId, where, message.id) -> stop of the latest line
    shells: dict[str, set[str]] = {}  # sessionId -> shell call ids and `!` command uuids
    launched: dict[tuple[str, str], str] = {}  # (sessionId, task id) -> launching call id
    exited: set[tuple[str, str]] = set()  # (sessionId, task id) with a recorded exit code
    sessions: set[str] = set()
    for path in files:
        if path.stat().st_size and b'"sessionId"' not in path.read_bytes():
            sessions.add(path.stem)  # summary-only and snapshot-only files: the session is the file name
        for raw in path.read_bytes().split(b"\n"):
            if not raw.strip():
                continue
            obj = json.loads(raw)
            sid = obj.get("sessionId")
            if sid is None:
                continue
            sessions.add(sid)
            where, line = str(path), obj
            data = obj.get("data") or {}
            if data.get("type") == "agent_progress":
                if data.get("agentId") in agent_files:
                    continue  # a copy of a message its subagent's own file holds
                where, line = f"progress:{data.get('agentId')}", data.get("message") or {}
            message = line.get("message") or {}
            content = message.get("content") if isinstance(message, dict) else None
            if line.get("type") == "assistant" and message.get("id") and message.get("model") != "<synthetic>" \
                    and not line.get("isApiErrorMessage"):
                stops[(sid, where, message["id"])] = message.get("stop_reason")
            if line.get("type") == "assistant" and isinstance(content, list):
                shells.setdefault(sid, set()).update(
                    b["id"] for b in content if b.get("type") == "tool_use" and b.get("name") in ("Bash", "PowerShell")
                )
            if line.get("type") == "user" and isinstance(content, str) and content.startswith("<bash-input>"):
                shells.setdefault(sid, set()).add(line["uuid"])
            result = line.get("toolUseResult")
            if isinstance(result, dict) and isinstance(content, list) and content:
                if result.get("backgroundTaskId"):
                    launched[(sid, result["backgroundTaskId"])] = content[0].get("tool_use_id")
                task = result.get("task") if isinstance(result.get("task"), dict) else {}
                if result.get("exitCode") is not None and result.get("shellId"):
                    exited.add((sid, result["shellId"]))
                if task.get("exitCode") is not None and task.get("task_id"):
                    exited.add((sid, task["task_id"]))
    incomplete: dict[str, int] = {}
    for (sid, _, _), stop in stops.items():
        if stop is None:
            incomplete[sid] = incomplete.get(sid, 0) + 1
    for key in exited:
        if key in launched:
            shells[key[0]].discard(launched[key])
    return sessions, incomplete, {sid: len(ids) for sid, ids in shells.items() if ids}


def test_real_losses_follow_the_streams(corpus):
    sessions, incomplete, shell = _independent_loss_counts()
    losses = corpus["losses"].with_columns(session_id=pl.col("session_key").str.split("/").list.first())

    def per_session_id(category: str) -> dict[str, int]:
        found = rows(losses, category=category).group_by("session_id").agg(pl.col("count").sum())
        return dict(found.iter_rows())

    # every session of the corpus has the rendering loss (its subagents and sidechains too)
    assert set(rows(losses, category="model_rendering")["session_id"]) == sessions
    assert per_session_id("usage_incomplete") == incomplete
    assert per_session_id("shell_exit_code") == shell
    assert len(incomplete) > 5 and len(shell) > 10


def test_authored_versions_are_not_real_evidence(authored):
    coverage = authored["manifest"]["export_report"]["coverage"]
    assert {"2.1.280", "2.1.39", "2.1.20"} <= set(coverage["versions_in_input"])
    # authored tests do not qualify a version: 2.1.280 is covered here but is no real evidence
    assert "2.1.280" not in coverage["real_evidence_versions"]


def test_real_inline_sidechains_are_content_matched_lineage_declared_lost(corpus):
    # 1.0.108 writes Task runs inline (isSidechain) with no agentId: each run starts with a user line
    # without parent, and only its text ties it to the Task call whose input.prompt it repeats
    path = CORPUS / "d-kimuson-claude-code-viewer" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    objects = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    prompts = {
        block["input"].get("prompt"): (block["id"], block["input"].get("subagent_type"))
        for obj in objects if obj["type"] == "assistant"
        for block in obj["message"]["content"] if block.get("type") == "tool_use" and block["name"] == "Task"
    }
    roots = {
        obj["uuid"]: prompts[obj["message"]["content"]]
        for obj in objects
        if obj.get("isSidechain") and obj["type"] == "user" and obj["parentUuid"] is None
    }
    assert len(roots) == 2
    session = path.stem
    for root, (call_id, role) in roots.items():
        key = f"{session}/sidechain-{root}"
        edge = one(corpus["lineage"], session_key=key, relation="spawned_by")
        assert (edge["parent_session_key"], edge["call_id"], edge["evidence"], edge["evidence_detail"]) == (
            session, call_id, "content_match", "tool_use.prompt",
        )
        assert edge["role"] == role == "general-purpose"
        assert "content_match" in one(corpus["losses"], session_key=key, category="lineage")["detail"]
        # matched by content only: the entry does not accept it as identification of the sender
        assert who(first_user_message(corpus, key)) == (None, None)
