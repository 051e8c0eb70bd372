"""Codex paginated threads and the newer line kinds (tests/fixtures/codex/paginated, authored from the
Codex rollout reference §14.3 to §14.5): every value against what the test reads from the lines
itself with json.loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import batch
from conftest import CODEX_FIELDS, FIXTURES, codex_responses, one, part_native, read_tables, rows

PAGINATED = FIXTURES / "codex" / "paginated"
MAIN, CHILD = sorted(PAGINATED.glob("rollout-*.jsonl"))  # the main thread is the earlier file
MESSAGE_ITEMS = {"UserMessage": ("message", "user"), "AgentMessage": ("message", "assistant"),
                 "Reasoning": ("reasoning", None)}
CALL_TYPES = ("function_call", "custom_tool_call", "web_search_call", "tool_search_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "tool_search_output")


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def meta(path: Path) -> dict:
    return load(path)[0]["payload"]


def shown(path: Path) -> str:
    return f"codex/{path.name}"


def item(obj: dict) -> dict | None:
    p = obj.get("payload") or {}
    return p.get("item") if obj["type"] == "event_msg" and p.get("type") == "item_completed" else None


def items(objs: list[dict], *types: str) -> list[tuple[int, dict]]:
    """(line, item) of the item_completed lines of these TurnItem types, in file order."""
    return [(n, item(o)) for n, o in enumerate(objs, 1) if item(o) and item(o)["type"] in types]


def text_of(obj: dict) -> str:
    """The text of a message item (content texts), a reasoning item (summary texts), or a TurnItem."""
    p = item(obj) or obj["payload"]
    if p["type"] in ("reasoning", "Reasoning"):
        return "\n".join(s["text"] if isinstance(s, dict) else s for s in p.get("summary") or p.get("summary_text"))
    return "\n".join(b["text"] for b in p["content"] if b.get("text") is not None)


def inherited(objs: list[dict]) -> set[int]:
    """Lines (1-based) below the file's subagent_history_start_ordinal, its own session_meta excepted (§14.5)."""
    start = objs[0]["payload"].get("subagent_history_start_ordinal")
    return {n for n, o in enumerate(objs, 1) if start is not None and n > 1 and o["ordinal"] < start}


def fates(objs: list[dict], sid: str) -> dict[int, tuple[str, str | None, str]]:
    """line -> (status, reason, record_id) as reference §14.3 and §14.4 give them: a message item's
    response copy, a tool item naming a response call, a ContextCompaction after a compacted line, an
    agent_message repeating an inter-agent line, a re-emitted token_count are duplicates of the
    record they repeat; every other line is its own record."""
    rid = lambda n: f"{sid}:line:{n}"  # noqa: E731
    out = {n: ("mapped", None, rid(n)) for n in range(1, len(objs) + 1)}
    used: set[int] = set()
    for n, it in items(objs, *MESSAGE_ITEMS):
        ptype, role = MESSAGE_ITEMS[it["type"]]
        copy = next(m for m, o in enumerate(objs, 1) if m not in used and o["type"] == "response_item"
                    and o["payload"]["type"] == ptype and o["payload"].get("role") == role
                    and text_of(o) == text_of(objs[n - 1]))
        used.add(copy)
        out[copy] = ("duplicate", "response_copy", rid(n))
    calls = {(o["payload"].get("call_id") or o["payload"].get("id")): m for m, o in enumerate(objs, 1)
             if o["type"] == "response_item" and o["payload"]["type"] in CALL_TYPES}
    outputs = {o["payload"]["call_id"]: m for m, o in enumerate(objs, 1)
               if o["type"] == "response_item" and o["payload"]["type"] in OUTPUT_TYPES}
    for n, it in items(objs, "CommandExecution", "McpToolCall", "FileChange", "WebSearch", "CollabAgentToolCall"):
        if it["id"] in calls:
            out[n] = ("duplicate", "item_copy", rid(outputs.get(it["id"], calls[it["id"]])))
    for n, _ in items(objs, "ContextCompaction"):
        compacted = max(m for m in range(1, n) if objs[m - 1]["type"] == "compacted")
        out[n] = ("duplicate", "item_copy", rid(compacted))
    sent = {(o["payload"]["author"], o["payload"]["recipient"], o["payload"]["content"]): m
            for m, o in enumerate(objs, 1) if o["type"] == "inter_agent_communication"}
    for n, o in enumerate(objs, 1):
        p = o["payload"]
        if o["type"] == "response_item" and p["type"] == "agent_message":
            out[n] = ("duplicate", "response_copy", rid(sent[(p["author"], p["recipient"], text_of(o))]))
    first: dict[str, int] = {}
    for n, o in enumerate(objs, 1):
        p = o["payload"]
        if o["type"] == "event_msg" and p["type"] == "token_count" and p.get("info"):
            info = p["info"]
            key = json.dumps([[info[k][f] for f in CODEX_FIELDS] for k in ("total_token_usage", "last_token_usage")])
            if key in first:
                out[n] = ("duplicate", "token_count_repeat", rid(first[key]))
            first.setdefault(key, n)
    return out


@pytest.fixture(scope="module")
def t(tmp_path_factory) -> dict[str, pl.DataFrame]:
    src = tmp_path_factory.mktemp("paginated") / "codex"
    shutil.copytree(PAGINATED, src, ignore=shutil.ignore_patterns("*.md"))
    out = src.parent / "out"
    batch.convert([src], out)
    return read_tables(out)


def test_every_line_is_accounted_for_with_its_fate(t):
    for path in (MAIN, CHILD):
        objs, sid = load(path), meta(path)["id"]
        mine = rows(t["source_lines"], source_file=shown(path)).sort("line")
        got = {r["line"]: (r["status"], r["reason"], r["record_id"]) for r in mine.iter_rows(named=True)}
        assert got == fates(objs, sid), path.name
        # a copy keeps its JSON in source_lines; a record's is records.native
        for r in mine.filter(pl.col("status") == "duplicate").iter_rows(named=True):
            assert json.loads(r["native"]) == objs[r["line"] - 1]
        recs = rows(t["records"], session_key=sid)
        assert recs.height == sum(f[0] == "mapped" for f in fates(objs, sid).values())
        copies = rows(mine, status="duplicate").group_by("record_id").len()
        for record_id, n in copies.iter_rows():
            assert one(recs, record_id=record_id)["observation_count"] == 1 + n
    assert t["rejects"].height == 0


def test_prompts_replies_and_reasoning_are_counted_once(t):
    for path in (MAIN, CHILD):
        objs, sid = load(path), meta(path)["id"]
        recs = rows(t["records"], session_key=sid)
        for kind, author in (("UserMessage", "human"), ("AgentMessage", "model")):
            expected = items(objs, kind)
            mine = rows(recs, author=author, native_subtype="item_completed").filter(
                pl.col("record_id").is_in([f"{sid}:line:{n}" for n, _ in expected]))
            assert mine.height == len(expected), (path.name, kind)
            for n, it in expected:
                texts = rows(t["parts"], record_id=f"{sid}:line:{n}", part_type="text")["text"].to_list()
                assert texts == [b["text"] for b in it["content"]]
                # the text is in the parts once: the response copy has no record, so no part (a subagent's
                # reply sent to its parent is another record, an inter-agent message)
                same = t["parts"].filter(pl.col("session_key") == sid, pl.col("text") == texts[0])
                assert same.join(rows(recs, from_address=None), on="record_id").height == 1
        prompts = rows(recs, author="human", origin="prompt")
        assert prompts.height == len(items(objs, "UserMessage"))
        # the model-visible injected context stays a message of the harness
        injected = [n for n, o in enumerate(objs, 1) if o["type"] == "response_item"
                    and o["payload"].get("role") in ("user", "developer") and fates(objs, sid)[n][0] == "mapped"]
        assert set(rows(recs, author="harness", origin="injected", native_type="response_item")["source_line"]) \
            == set(injected)
    main = one(t["sessions"], session_key=meta(MAIN)["id"])
    assert main["first_prompt"] == items(load(MAIN), "UserMessage")[0][1]["content"][0]["text"]


def test_reasoning_summaries_and_the_encrypted_content_of_its_copy(t):
    objs, sid = load(MAIN), meta(MAIN)["id"]
    fate = fates(objs, sid)
    for n, it in items(objs, "Reasoning"):
        record_id = f"{sid}:line:{n}"
        assert one(t["records"], record_id=record_id)["author"] == "model"
        parts = rows(t["parts"], record_id=record_id).sort("part_index")
        assert parts.filter(pl.col("part_type") == "thinking")["text"].to_list() == it["summary_text"]
        copy = next(m for m, f in fate.items() if f == ("duplicate", "response_copy", record_id))
        encrypted = one(parts, part_type="redacted_thinking")
        assert (encrypted["source_line"], encrypted["part_index"]) == (copy, len(it["summary_text"]))
        assert part_native(t, encrypted) == objs[copy - 1]["payload"]["encrypted_content"]
        assert encrypted["capture_state"] == "encrypted"
    held = sum(1 for o in objs if (o.get("payload") or {}).get("encrypted_content"))  # reasoning and compaction items
    assert one(t["losses"], session_key=sid, category="reasoning_encrypted")["count"] == held


def _duration_ms(it: dict) -> int:
    return round(it["duration"]["secs"] * 1000 + it["duration"]["nanos"] / 1e6)


def test_command_exit_codes_and_durations_are_the_items(t):
    for path in (MAIN, CHILD):
        objs, sid = load(path), meta(path)["id"]
        commands = items(objs, "CommandExecution")
        assert commands
        for n, it in commands:
            call = one(t["tool_calls"], session_key=sid, call_id=it["id"])
            assert call["exit_code"] == it["exit_code"] and call["exit_code_source"] == "command_execution"
            assert call["duration_ms"] == _duration_ms(it)
            assert call["is_error"] == (it["exit_code"] != 0)
            assert call["status"] == ("error" if it["exit_code"] != 0 else "completed")
            assert call["tool_kind"] == "execute"
        # every execute call has its exit code: no shell_exit_code loss
        assert rows(t["losses"], session_key=sid, category="shell_exit_code").height == 0
    # the output's header says 1.2 seconds; the item's 1.234567 s is what tool_calls holds
    first = one(t["tool_calls"], call_id=items(load(MAIN), "CommandExecution")[0][1]["id"])
    assert first["duration_ms"] == 1235


def test_a_tool_item_and_the_response_call_it_names_are_one_call(t):
    objs, sid = load(MAIN), meta(MAIN)["id"]
    response_calls = [o["payload"] for o in objs if o["type"] == "response_item" and o["payload"]["type"] in CALL_TYPES]
    named = {p.get("call_id") or p.get("id") for p in response_calls}
    own = [(n, it) for n, it in items(objs, "CommandExecution", "McpToolCall", "FileChange", "WebSearch",
                                      "CollabAgentToolCall") if it["id"] not in named]
    calls = rows(t["tool_calls"], session_key=sid)
    assert calls.height == len(response_calls) + len(own)
    mcp = next(it for _, it in items(objs, "McpToolCall"))
    row = one(calls, call_id=mcp["id"])
    assert row["tool_name"] == f"mcp__{mcp['server']}__{mcp['tool']}" and row["mcp_server"] == mcp["server"]
    assert row["duration_ms"] == _duration_ms(mcp) and row["status"] == mcp["status"] and row["is_error"] is False
    search = next(p for p in response_calls if p["type"] == "tool_search_call")
    row = one(calls, call_id=search["call_id"])
    assert row["tool_name"] == "tool_search" and row["tool_kind"] == "search"
    assert json.loads(row["input"]) == search["arguments"] and row["result_record_id"] is not None
    # a user's shell command no response call names is a call of its own: one record, call and result
    (n, shell), = own
    row = one(calls, call_id=shell["id"])
    assert row["call_record_id"] == row["result_record_id"] == f"{sid}:line:{n}"
    assert row["requested_by"] == "user" and row["exit_code"] == shell["exit_code"]
    assert json.loads(row["input"]) == {"command": shell["command"]}
    result = one(t["parts"], record_id=f"{sid}:line:{n}", part_type="tool_result")
    assert result["text"] == shell["aggregated_output"]
    assert one(t["records"], record_id=f"{sid}:line:{n}")["author"] == "human"


def test_file_change_items_are_file_changes(t):
    objs, sid = load(MAIN), meta(MAIN)["id"]
    (n, change), = items(objs, "FileChange")
    output = next(m for m, o in enumerate(objs, 1) if o["payload"].get("call_id") == change["id"]
                  and o["payload"]["type"].endswith("_output"))
    mine = rows(t["file_changes"], session_key=sid).sort("file_index")
    assert mine["path"].to_list() == list(change["changes"])
    kinds = {"add": "create", "delete": "delete", "update": "update"}
    assert mine["change_kind"].to_list() == [kinds[c["type"]] for c in change["changes"].values()]
    assert [json.loads(x) for x in mine["native"]] == list(change["changes"].values())
    assert set(mine["record_id"]) == {f"{sid}:line:{output}"} and set(mine["call_id"]) == {change["id"]}
    assert set(mine["source"]) == {"file_change"} and set(mine["cause_actor"]) == {"model"}
    assert set(mine["tool_name"]) == {"apply_patch"}
    assert set(mine["seq"]) == {one(t["records"], record_id=f"{sid}:line:{output}")["seq"]}


def test_plan_items_are_document_plans(t):
    objs, sid = load(MAIN), meta(MAIN)["id"]
    plans = items(objs, "Plan")
    mine = rows(t["plans"], session_key=sid).sort("position")
    assert mine["record_id"].to_list() == [f"{sid}:line:{n}" for n, _ in plans]
    assert mine["content"].to_list() == [p["text"] for _, p in plans]
    assert mine["plan_id"].to_list() == [p["id"] for _, p in plans]
    assert set(mine["plan_type"]) == {"document"} and set(mine["op"]) == {"replace"}
    assert set(mine["plan_source"]) == {"plan_item"}
    assert [json.loads(x) for x in mine["native"]] == [p for _, p in plans]


def test_a_context_compaction_is_the_compaction_its_compacted_line_records(t, tmp_path):
    objs, sid = load(MAIN), meta(MAIN)["id"]
    compacted = [n for n, o in enumerate(objs, 1) if o["type"] == "compacted"]
    mine = rows(t["compactions"], session_key=sid)
    assert mine["record_id"].to_list() == [f"{sid}:line:{n}" for n in compacted]
    assert mine["summary"].to_list() == [objs[n - 1]["payload"]["message"] for n in compacted]
    # without its compacted line, the item is the compaction (no summary)
    alone = [o for o in objs if o["type"] != "compacted"]
    folder = tmp_path / "codex"
    folder.mkdir()
    (folder / MAIN.name).write_text("".join(json.dumps(o) + "\n" for o in alone))
    batch.convert([folder], tmp_path / "out")
    out = read_tables(tmp_path / "out")
    (n, _), = items(alone, "ContextCompaction")
    row = one(out["compactions"], session_key=sid)
    assert row["record_id"] == f"{sid}:line:{n}" and row["summary"] is None and row["compaction_kind"] == "full"
    assert one(out["records"], record_id=f"{sid}:line:{n}")["kind"] == "compaction"


def test_inherited_context_is_the_parents_and_not_the_childs_turns(t):
    objs, child = load(CHILD), meta(CHILD)
    parent, sid = child["parent_thread_id"], child["id"]
    below = inherited(objs)
    assert below
    recs = rows(t["records"], session_key=sid)
    copied = {r["source_line"]: r["copied_from_session_id"] for r in recs.iter_rows(named=True)}
    assert {n for n, c in copied.items() if c is not None} == {n for n in below if fates(objs, sid)[n][0] == "mapped"}
    assert {c for c in copied.values() if c is not None} == {parent}
    # the child's turns are its own: no session event comes from an inherited line
    events = rows(t["session_events"], session_key=sid, field="state")
    own_turns = [o["payload"]["type"] for n, o in enumerate(objs, 1) if n not in below
                 and o["type"] == "event_msg" and o["payload"]["type"] in ("task_started", "task_complete")]
    assert events["value"].to_list() == ["running" if k == "task_started" else "idle" for k in own_turns]
    assert not set(events["record_id"]) & {f"{sid}:line:{n}" for n in below}
    # nor its first prompt, nor its turn ids
    assert one(t["sessions"], session_key=sid)["first_prompt"] is None
    own_turn_ids = {o["payload"]["turn_id"] for n, o in enumerate(objs, 1)
                    if n not in below and o["payload"].get("type") == "task_started"}
    assert set(recs.filter(~pl.col("source_line").is_in(list(below)))["turn_id"].drop_nulls()) == own_turn_ids
    # the inherited token_count is the parent's response, counted once, for the parent
    for response in codex_responses([objs[n - 1] for n in sorted(below)]):
        mine = t["inferences"].filter(pl.col("input_total_tokens") == response["input_tokens"],
                                      pl.col("output_total_tokens") == response["output_tokens"])
        assert mine["session_key"].to_list() == [parent] and mine["observation_count"].to_list() == [2]


def test_usage_is_one_response_per_distinct_pair_of_each_thread(t):
    main, child = load(MAIN), load(CHILD)
    own_child = [o for n, o in enumerate(child, 1) if n not in inherited(child)]
    for path, objs in ((MAIN, main), (CHILD, own_child)):
        mine = rows(t["inferences"], session_key=meta(path)["id"])
        expected = codex_responses(objs)
        assert mine.height == len(expected)
        assert mine["input_total_tokens"].sum() == sum(r["input_tokens"] for r in expected)
        assert mine["output_total_tokens"].sum() == sum(r["output_tokens"] for r in expected)


def test_the_spawned_thread_is_named_by_the_collab_item(t):
    objs = load(MAIN)
    (_, collab), = items(objs, "CollabAgentToolCall")
    child = meta(CHILD)["id"]
    assert collab["receiver_thread_ids"] == [child]
    edge = one(t["lineage"], session_key=child, relation="spawned_by")
    assert edge["parent_session_key"] == meta(MAIN)["id"] and edge["call_id"] == collab["id"]
    assert edge["evidence"] == "native_field" and edge["evidence_detail"] == "CollabAgentToolCall.receiver_thread_ids"
    assert edge["call_record_id"] == one(t["tool_calls"], call_id=collab["id"])["call_record_id"]
    assert rows(t["losses"], session_key=child, category="lineage").height == 0
    assert one(t["sessions"], session_key=child)["root_session_key"] == meta(MAIN)["id"]


def test_newer_line_kinds_are_mapped_or_kept(t):
    objs, sid = load(MAIN), meta(MAIN)["id"]
    recs = rows(t["records"], session_key=sid)

    def lines(kind: str, ptype: str | None = None) -> list[int]:
        return [n for n, o in enumerate(objs, 1) if o["type"] == kind
                and (ptype is None or (o["payload"] or {}).get("type") == ptype)]

    def record(n: int) -> dict:
        return one(recs, record_id=f"{sid}:line:{n}")

    for n in lines("world_state"):
        assert (record(n)["kind"], record(n)["author"], record(n)["origin"]) == ("attachment", "harness", "injected")
        data = one(t["parts"], record_id=f"{sid}:line:{n}")
        assert (data["part_type"], data["schema"]) == ("data", "com.openai.codex/world_state")
        assert part_native(t, data) == objs[n - 1]["payload"]["state"]
    for n in lines("inter_agent_communication"):
        p = objs[n - 1]["payload"]
        assert (record(n)["kind"], record(n)["author"], record(n)["origin"]) == ("message", "agent", "inter_session")
        assert record(n)["from_address"] == p["author"]
        assert one(t["parts"], record_id=f"{sid}:line:{n}")["text"] == p["content"]
    for n in lines("event_msg", "thread_settings_applied") + lines("response_item", "configuration_update"):
        assert record(n)["kind"] == "config_change"
    for n in lines("event_msg", "thread_goal_updated"):
        assert record(n)["kind"] == "session_info"
    for kind in ("inter_agent_communication_metadata", "security_risk_score", "retained_context", "realtime_item"):
        (n,) = lines(kind)
        assert record(n)["kind"] == "unknown" and json.loads(record(n)["native"]) == objs[n - 1]
    (n,) = lines("response_item", "context_compaction")
    assert record(n)["kind"] == "unknown"


def test_thread_settings_and_goals_are_session_events_where_they_change(t):
    objs, sid = load(MAIN), meta(MAIN)["id"]
    # the values each field takes, in file order, from turn_context and thread_settings_applied lines
    fields = {"model": ("model", "model"), "approval_policy": ("approval_policy", "approval_policy"),
              "reasoning_effort": ("effort", "reasoning_effort"), "cwd": ("cwd", "cwd")}
    for field, (context_key, settings_key) in fields.items():
        values = []
        for o in objs:
            p = o["payload"]
            value = p.get(context_key) if o["type"] == "turn_context" else \
                (p["thread_settings"].get(settings_key) if p.get("type") == "thread_settings_applied" else None)
            if value is not None and (not values or values[-1] != value):
                values.append(value)
        mine = rows(t["session_events"], session_key=sid, field=field).sort("seq")
        assert mine["value"].to_list() == values, field
    goals = [o["payload"]["goal"] for o in objs if o["payload"].get("type") == "thread_goal_updated"]
    for field, key in (("goal", "objective"), ("goal_status", "status")):
        values = []
        for g in goals:
            if not values or values[-1] != g[key]:
                values.append(g[key])
        mine = rows(t["session_events"], session_key=sid, field=field).sort("seq")
        assert mine["value"].to_list() == values and set(mine["event_kind"]) == {"session_info"}


def test_the_ordinal_is_kept_in_native_and_positions_are_lines(t):
    for path in (MAIN, CHILD):
        objs, sid = load(path), meta(path)["id"]
        for r in rows(t["records"], session_key=sid).iter_rows(named=True):
            assert r["position"] == f"line:{r['source_line']}"
            assert json.loads(r["native"])["ordinal"] == objs[r["source_line"] - 1]["ordinal"]
        assert [o["ordinal"] for o in objs] == list(range(len(objs)))


def test_a_legacy_file_keeps_the_legacy_mapping(tmp_path):
    # the same lines in a thread whose history mode is legacy (§14.3: the first session_meta says):
    # items are unknown records, response items and their events as before, nothing new mapped
    objs = load(MAIN)
    objs[0]["payload"]["history_mode"] = "legacy"
    folder = tmp_path / "codex"
    folder.mkdir()
    (folder / MAIN.name).write_text("".join(json.dumps(o) + "\n" for o in objs))
    batch.convert([folder], tmp_path / "out")
    out = read_tables(tmp_path / "out")
    sid = objs[0]["payload"]["id"]
    recs = rows(out["records"], session_key=sid)
    assert set(rows(recs, native_subtype="item_completed")["kind"]) == {"unknown"}
    for kind in ("world_state", "inter_agent_communication", "security_risk_score"):
        assert set(rows(recs, native_type=kind)["kind"]) == {"unknown"}
    reasons = set(rows(out["source_lines"], source_file=shown(MAIN))["reason"].drop_nulls())
    assert reasons == {"token_count_repeat"}
    assert out["file_changes"].height == out["plans"].height == 0
    assert rows(recs, author="human").height == 0  # no user_message event says which user item is typed
    exec_call = one(out["tool_calls"], call_id=items(objs, "CommandExecution")[0][1]["id"])
    assert exec_call["exit_code_source"] == "output_text"  # the output's header, as in any legacy file
