"""Codex rollouts (tests/fixtures/codex): every mapped value against what the test reads from the
lines itself with json.loads (the Codex rollout reference, codex-format.md)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

import batch
from conftest import CODEX_FIELDS as FIELDS
from conftest import FIXTURES, codex_responses, one, read_tables, rows

CODEX = FIXTURES / "codex"
REAL = sorted(CODEX.glob("rollout-*.jsonl"))  # whole real sessions; composite/ is schema coverage only
COMPOSITE = CODEX / "composite" / "small.jsonl"
OLD = CODEX / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
TINY = CODEX / "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def session_id(path: Path) -> str:
    return load(path)[0]["payload"]["id"]


def shown(path: Path) -> str:
    return f"codex/{path.relative_to(CODEX).as_posix()}"


def responses(path: Path) -> list[dict]:
    return codex_responses(load(path))


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, pl.DataFrame]:
    src = tmp_path_factory.mktemp("codex") / "codex"
    shutil.copytree(CODEX, src, ignore=shutil.ignore_patterns("records", "paginated"))  # authored: test_codex_records.py, test_codex_paginated.py
    out = src.parent / "out"
    batch.convert([src], out)
    return {**read_tables(out), "manifest": json.loads((out / "manifest.json").read_text())}


def test_every_line_of_every_file_is_accounted_for(tables):
    lines = tables["source_lines"]
    for path in [*REAL, COMPOSITE]:
        objs = load(path)
        mine = rows(lines, source_file=shown(path)).sort("line")
        assert mine["line"].to_list() == list(range(1, len(objs) + 1)), path.name
        assert set(mine["status"]) <= {"mapped", "duplicate"}, path.name
        assert mine.filter(pl.col("record_id").is_null()).height == 0
    assert tables["rejects"].height == 0
    assert sorted(i["path"] for i in tables["manifest"]["inputs"]) == sorted(shown(p) for p in [*REAL, COMPOSITE])
    assert {i["format"] for i in tables["manifest"]["inputs"]} == {"codex-rollout-jsonl"}


def test_sessions_come_from_the_first_session_meta(tables):
    for path in [*REAL, COMPOSITE]:
        meta = load(path)[0]["payload"]
        s = one(tables["sessions"], session_key=meta["id"])
        assert s["session_id"] == meta["id"] and s["agent"] == "codex" and s["stream_kind"] == "main"
        assert s["producer_source"] == "codex-rollout-jsonl"
        assert s["cwd"] == meta["cwd"]
        assert s["client_name"] == meta["originator"]
        assert s["versions"] == [meta["cli_version"]]
        assert s["git_branch"] == (meta.get("git") or {}).get("branch")
        native = json.loads(s["meta"])["com.openai.codex/session_meta"]
        assert native["model_provider"] == meta["model_provider"]
        assert native.get("git") == meta.get("git") and native["source"] == meta["source"]
        assert "base_instructions" not in native
        assert s["line_count"] == len(load(path))


def test_usage_is_one_response_per_distinct_pair(tables):
    inf = tables["inferences"]
    for path in REAL:
        expected = responses(path)
        mine = rows(inf, session_key=session_id(path))
        assert mine.height == len(expected), path.name
        assert mine["input_total_tokens"].sum() == sum(r["input_tokens"] for r in expected)
        assert mine["cache_read_tokens"].sum() == sum(r["cached_input_tokens"] for r in expected)
        assert mine["output_total_tokens"].sum() == sum(r["output_tokens"] for r in expected)
        assert mine["output_reasoning_tokens"].sum() == sum(r["reasoning_output_tokens"] for r in expected)
        # on these real files the rule equals the final running total (README of the corpus)
        last_total = [o for o in load(path) if (o.get("payload") or {}).get("type") == "token_count"
                      and o["payload"].get("info")][-1]["payload"]["info"]["total_token_usage"]["total_tokens"]
        assert mine["input_total_tokens"].sum() + mine["output_total_tokens"].sum() == last_total
        assert mine["input_includes_cache"].all() and mine["usage_complete"].all()
        assert set(mine["usage_source"]) == {"token_count"}
    one_old = rows(inf, session_key=session_id(OLD))
    assert one_old["input_total_tokens"].sum() == 1_099_261 and one_old["output_total_tokens"].sum() == 22_305


def test_usage_rows_point_at_their_token_count_line_and_model(tables):
    objs = load(OLD)
    row = rows(tables["inferences"], session_key=session_id(OLD)).sort("usage_source_line").row(0, named=True)
    line = objs[row["usage_source_line"] - 1]
    last = line["payload"]["info"]["last_token_usage"]
    assert row["input_total_tokens"] == last["input_tokens"]
    assert row["input_uncached_tokens"] == last["input_tokens"] - last["cached_input_tokens"]
    model = [o["payload"]["model"] for o in objs[: row["usage_source_line"]] if o["type"] == "turn_context"][-1]
    assert row["model"] == model
    rec = one(tables["records"], record_id=row["record_id"])
    assert rec["kind"] == "com.openai.codex/token_count" and rec["inference_id"] == row["inference_id"]


def test_repeated_token_counts_are_duplicates_of_the_first(tables):
    for path in REAL:
        keys, expected = {}, 0
        for n, obj in enumerate(load(path), 1):
            p = obj.get("payload") or {}
            if p.get("type") == "token_count" and p.get("info"):
                info = p["info"]
                key = json.dumps([[info["total_token_usage"][k] for k in FIELDS],
                                  [info["last_token_usage"][k] for k in FIELDS]])
                expected += key in keys
                keys.setdefault(key, n)
        repeats = rows(tables["source_lines"], source_file=shown(path), reason="token_count_repeat")
        assert repeats.height == expected, path.name


def _texts(path: Path) -> tuple[int, int, int, int]:
    """(assistant message items, agent_message events, user message items, user_message events)"""
    objs = load(path)
    items = [o["payload"] for o in objs if o["type"] == "response_item" and o["payload"].get("type") == "message"]
    events = [o["payload"]["type"] for o in objs if o["type"] == "event_msg"]
    return (sum(i["role"] == "assistant" for i in items), events.count("agent_message"),
            sum(i["role"] == "user" for i in items), events.count("user_message"))


def test_text_written_twice_is_one_record(tables):
    recs = tables["records"]
    for path in REAL:
        assistant_items, agent_events, user_items, user_events = _texts(path)
        mine = rows(recs, session_key=session_id(path), kind="message")
        # every event copy pairs with its item in these files: the items alone are records
        assert rows(mine, native_subtype="agent_message").height == 0, path.name
        assert rows(mine, native_subtype="user_message").height == 0, path.name
        assert rows(mine, native_subtype="message", author="model").height == assistant_items
        assert rows(mine, native_subtype="message", author="human").height == user_events
        assert rows(mine, native_subtype="message", origin="injected").height == (
            user_items - user_events + sum(1 for o in load(path) if o["type"] == "response_item"
                                           and o["payload"].get("role") == "developer"))
        copies = rows(tables["source_lines"], source_file=shown(path), reason="event_copy")
        reasoning_events = sum(1 for o in load(path) if o["type"] == "event_msg"
                               and o["payload"]["type"] == "agent_reasoning")
        assert copies.height == agent_events + user_events + reasoning_events, path.name


def test_the_prompt_record_holds_the_typed_text(tables):
    objs = load(OLD)
    prompt = next(o["payload"]["message"] for o in objs if o["payload"].get("type") == "user_message")
    rec = one(tables["records"], session_key=session_id(OLD), author="human")
    part = one(tables["parts"], record_id=rec["record_id"])
    assert part["text"] == prompt and part["part_type"] == "text"
    copy = one(tables["source_lines"], source_file=shown(OLD), reason="event_copy", record_id=rec["record_id"])
    assert json.loads(copy["native"])["payload"]["message"] == prompt


def test_the_first_prompt_is_the_typed_text_the_first_user_message_repeats(tables):
    # Codex writes the typed prompt as a user message item, then its user_message event (§6): the
    # session's first prompt is that item's text, never the injected context before it
    for path in REAL:
        objs = load(path)
        event = next(i for i, o in enumerate(objs) if o["type"] == "event_msg" and o["payload"]["type"] == "user_message")
        item = next(i for i in range(event - 1, -1, -1)
                    if objs[i]["type"] == "response_item" and objs[i]["payload"].get("role") == "user")
        text = " ".join(b["text"][:1000] for b in objs[item]["payload"]["content"] if b["type"] == "input_text")
        s = one(tables["sessions"], session_key=session_id(path))
        assert s["first_prompt"] == re.sub(r"[ \t\n\v\f\r]+", " ", text).strip()[:200], path.name
        assert s["first_prompt_record_id"] == f"{session_id(path)}:line:{item + 1}"


def test_reasoning_summaries_are_parts_and_encrypted_content_a_loss(tables):
    objs = load(OLD)
    reasoning = [o["payload"] for o in objs if (o.get("payload") or {}).get("type") == "reasoning"]
    summaries = [s["text"] for r in reasoning for s in r["summary"]]
    parts = rows(tables["parts"], session_key=session_id(OLD), part_type="thinking").sort("source_line", "part_index")
    assert parts["text"].to_list() == summaries
    encrypted = sum(1 for r in reasoning if r.get("encrypted_content"))
    assert rows(tables["parts"], session_key=session_id(OLD), part_type="redacted_thinking").height == encrypted
    loss = one(tables["losses"], session_key=session_id(OLD), category="reasoning_encrypted")
    assert loss["count"] == encrypted


def test_tool_calls_join_their_outputs_by_call_id(tables):
    for path in REAL:
        objs = load(path)
        calls = {o["payload"]["call_id"]: o["payload"]["name"] for o in objs
                 if (o.get("payload") or {}).get("type") in ("function_call", "custom_tool_call")}
        outputs = {o["payload"]["call_id"] for o in objs
                   if (o.get("payload") or {}).get("type") in ("function_call_output", "custom_tool_call_output")}
        mine = rows(tables["tool_calls"], session_key=session_id(path)).filter(pl.col("call_id").str.starts_with("call"))
        assert dict(mine.select("call_id", "tool_name").iter_rows()) == calls, path.name
        done = set(mine.filter(pl.col("result_record_id").is_not_null())["call_id"])
        assert done == set(calls) & outputs
        assert set(mine.filter(pl.col("status") == "pending")["call_id"]) == set(calls) - outputs
    pending = rows(tables["tool_calls"], session_key=session_id(TINY), status="pending")
    assert pending.height == 1


def test_tool_kinds_by_name(tables):
    calls = tables["tool_calls"]
    assert set(rows(calls, tool_name="shell")["tool_kind"]) == {"execute"}
    assert set(rows(calls, tool_name="exec_command")["tool_kind"]) == {"execute"}
    mcp = calls.filter(pl.col("tool_name").str.starts_with("mcp__"))
    assert mcp.height > 0 and set(mcp["tool_kind"]) == {"other"} and set(mcp["provider_kind"]) == {"mcp"}
    assert mcp["mcp_server"].to_list() == [n.split("__")[1] for n in mcp["tool_name"]]
    shell = rows(calls, tool_name="shell", session_key=session_id(OLD)).row(0, named=True)
    first = next(o["payload"] for o in load(OLD) if (o.get("payload") or {}).get("name") == "shell")
    assert json.loads(shell["input"]) == json.loads(first["arguments"])


def test_unknown_kinds_of_the_composite_are_kept_not_rejected(tables):
    objs = load(COMPOSITE)
    kinds = {o["type"] for o in objs}
    assert {"world_state", "inter_agent_communication_metadata"} <= kinds
    recs = rows(tables["records"], session_key=session_id(COMPOSITE))
    for kind in ("world_state", "inter_agent_communication_metadata"):
        mine = rows(recs, native_type=kind)
        assert mine.height == sum(o["type"] == kind for o in objs)
        assert set(mine["kind"]) == {"unknown"}
        assert [json.loads(n) for n in mine["native"]] == [o for o in objs if o["type"] == kind]
    # later session_meta lines (other sessions' replays) are records of this file's stream
    assert rows(recs, native_type="session_meta").height == sum(o["type"] == "session_meta" for o in objs)


def test_a_legacy_rollout_converts(tmp_path):
    # synthetic, shaped after reference §2.1 (Rust CLI before 0.32): no real file of that era is in the fixtures
    sid = "0198a5c0-0000-4000-8000-000000000001"
    lines = [
        {"id": sid, "timestamp": "2025-08-11T10:00:00.000Z", "instructions": None,
         "git": {"commit_hash": "abc", "branch": "main", "repository_url": "https://example.invalid/r.git"}},
        {"record_type": "state"},
        {"type": "message", "id": "msg_1", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "id": "fc_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"a\\n\",\"metadata\":{\"exit_code\":0}}"},
        {"type": "message", "id": "msg_2", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]
    src = tmp_path / "sessions"
    src.mkdir()
    (src / f"rollout-2025-08-11T10-00-00-{sid}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines))
    batch.convert([src], tmp_path / "out")
    t = read_tables(tmp_path / "out")
    assert t["source_lines"]["status"].to_list() == ["mapped"] * len(lines)
    recs = t["records"].sort("seq")
    assert recs["native_type"].to_list() == ["session_meta", "legacy_state", *["response_item"] * 4]
    assert recs["kind"].to_list() == ["session_info", "unknown", "message", "message", "tool_result", "message"]
    s = one(t["sessions"], session_key=sid)
    assert s["git_branch"] == "main" and s["agent"] == "codex"
    call = one(t["tool_calls"], call_id="call_1")
    assert call["tool_kind"] == "execute" and call["status"] == "completed"
    assert call["exit_code"] == 0 and call["exit_code_source"] == "output_metadata" and call["is_error"] is False
    assert one(t["parts"], part_type="tool_result")["text"] == lines[4]["output"]
    assert t["inferences"].height == 0  # no usage before 0.32


def test_a_forks_replayed_usage_is_counted_once_for_the_parent(tmp_path):
    # synthetic fork, shaped after reference §10: the child file holds its own session_meta
    # (forked_from_id), then the parent's lines verbatim (its session_meta and token_counts), then its
    # own turn; no real fork file is in the fixtures. The parent is the real tiny 0.104 session.
    parent = load(TINY)
    pid = parent[0]["payload"]["id"]
    cid = "019c8a00-0000-7000-8000-000000000001"  # sorts before the parent: attribution is not by key order
    created = "2026-02-23T13:30:00.000Z"  # after every turn it copies: the copy runs to its last line
    own_meta = {**parent[0], "timestamp": created,
                "payload": {**parent[0]["payload"], "id": cid, "timestamp": created, "forked_from_id": pid}}
    last_total = [o for o in parent if o["payload"].get("type") == "token_count" and o["payload"]["info"]][-1]
    total = last_total["payload"]["info"]["total_token_usage"]
    new_last = {"input_tokens": 40000, "cached_input_tokens": 30000, "output_tokens": 500,
                "reasoning_output_tokens": 100, "total_tokens": 40500}
    new_total = {k: total[k] + new_last[k] for k in FIELDS}
    own_usage = {"timestamp": "2026-02-23T13:30:00.000Z", "type": "event_msg", "payload": {
        "type": "token_count", "info": {"total_token_usage": new_total, "last_token_usage": new_last,
                                        "model_context_window": 258400}, "rate_limits": None}}
    src = tmp_path / "sessions"
    src.mkdir()
    shutil.copy(TINY, src / TINY.name)
    child = src / f"rollout-2026-02-23T13-30-00-{cid}.jsonl"
    child.write_text("".join(json.dumps(o) + "\n" for o in [own_meta, *parent, own_usage]))
    batch.convert([src], tmp_path / "out")
    t = read_tables(tmp_path / "out")
    inf = t["inferences"]
    parent_responses = responses(TINY)
    assert inf.height == len(parent_responses) + 1
    assert rows(inf, session_key=pid).height == len(parent_responses)
    assert set(rows(inf, session_key=pid)["observation_count"]) == {2}
    mine = one(inf, session_key=cid)
    assert mine["input_total_tokens"] == 40000 and mine["output_total_tokens"] == 500
    assert inf["input_total_tokens"].sum() + inf["output_total_tokens"].sum() == new_total["total_tokens"]
    edge = one(t["lineage"], session_key=cid)
    assert edge["relation"] == "forked_from" and edge["parent_session_key"] == pid
    assert one(t["sessions"], session_key=cid)["forked_from_session_id"] == pid


def test_two_sessions_with_the_same_counts_keep_their_own_responses(tmp_path):
    # two runs of one prompt can report the same token counts: the same file under another session ID
    # (every line but its ID as written) is another session with as many responses of its own
    pid = session_id(TINY)
    other = "019c8a00-0000-7000-8000-0000000000aa"
    src = tmp_path / "sessions"
    src.mkdir()
    shutil.copy(TINY, src / TINY.name)
    (src / TINY.name.replace(pid, other)).write_text(TINY.read_text(encoding="utf-8").replace(pid, other))
    batch.convert([src], tmp_path / "out")
    inf = read_tables(tmp_path / "out")["inferences"]
    n = len(responses(TINY))
    assert n >= 1
    assert rows(inf, session_key=pid).height == n and rows(inf, session_key=other).height == n
    assert set(inf["observation_count"]) == {1}
    assert inf["inference_id"].n_unique() == 2 * n


def spawned(parent: list[dict], child_id: str, *, output: bool, event: bool) -> list[dict]:
    """The parent's lines with a spawn_agent call naming `child_id` in its output and/or its end event
    (reference §10), authored: no fixture spawns a thread."""
    ts = parent[-1]["timestamp"]
    call = {"timestamp": ts, "type": "response_item", "payload": {
        "type": "function_call", "name": "spawn_agent", "arguments": json.dumps({"message": "look"}),
        "call_id": "call_spawn_1"}}
    lines = [*parent, call]
    if event:
        lines.append({"timestamp": ts, "type": "event_msg", "payload": {
            "type": "collab_agent_spawn_end", "call_id": "call_spawn_1", "new_thread_id": child_id}})
    lines.append({"timestamp": ts, "type": "response_item", "payload": {
        "type": "function_call_output", "call_id": "call_spawn_1",
        "output": json.dumps({"agent_id": child_id, "nickname": "Scout"}) if output else "spawned"}})
    return lines


@pytest.mark.parametrize("output,event", [(True, False), (False, True), (True, True)])
def test_a_subagent_thread_is_spawned_by_the_call_that_names_it(tmp_path, output, event):
    parent = load(TINY)
    pid = parent[0]["payload"]["id"]
    cid = "019c8a00-0000-7000-8000-0000000000cc"
    other = "019c8a00-0000-7000-8000-0000000000dd"  # a subagent whose parent names no call
    src = tmp_path / "sessions"
    src.mkdir()
    (src / TINY.name).write_text("".join(json.dumps(o) + "\n" for o in spawned(parent, cid, output=output, event=event)))
    for child in (cid, other):
        meta = {**parent[0], "payload": {**parent[0]["payload"], "id": child, "source": {
            "subagent": {"thread_spawn": {"parent_thread_id": pid, "depth": 1, "agent_nickname": "Scout"}}}}}
        (src / f"rollout-2026-02-23T13-30-00-{child}.jsonl").write_text(json.dumps(meta) + "\n")
    batch.convert([src], tmp_path / "out")
    t = read_tables(tmp_path / "out")
    edge = one(t["lineage"], session_key=cid)
    assert (edge["relation"], edge["parent_session_key"], edge["call_id"], edge["evidence"]) == (
        "spawned_by", pid, "call_spawn_1", "native_field")
    expected = {"spawn_agent.agent_id"} if output else set()
    expected |= {"collab_agent_spawn_end.new_thread_id"} if event else set()
    assert set(edge["evidence_detail"].split(",")) == expected
    assert edge["call_record_id"] == one(t["tool_calls"], call_id="call_spawn_1")["call_record_id"]
    assert one(t["sessions"], session_key=cid)["parent_session_key"] == pid
    lineage_losses = t["losses"].filter(pl.col("category") == "lineage")
    assert lineage_losses["session_key"].to_list() == [other]


def test_the_manifest_says_how_codex_usage_is_selected(tables):
    report = tables["manifest"]["export_report"]
    versions = sorted({load(p)[0]["payload"]["cli_version"] for p in [*REAL, COMPOSITE]})  # each file's first line
    assert sorted(report["codex"]["coverage"]["versions_in_input"]) == versions
    assert "§9.6" in report["codex"]["usage_selection"]
    assert report["coverage"]["versions_in_input"] == []  # no Claude Code file in this run


def test_a_grown_rollout_is_converted_again_whole(tmp_path):
    src = tmp_path / "sessions"
    shutil.copytree(CODEX, src, ignore=shutil.ignore_patterns("records"))
    out = tmp_path / "out"
    batch.convert([src], out)
    grown = src / TINY.name
    objs = load(TINY)
    extra = {"timestamp": "2026-02-23T13:30:00.000Z", "type": "event_msg",
             "payload": {"type": "task_complete", "turn_id": "t", "last_agent_message": None}}
    with grown.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(extra) + "\n")
    batch.convert([src], out)
    t = read_tables(out)
    mine = rows(t["source_lines"], source_file="sessions/" + TINY.name).sort("line")
    assert mine["line"].to_list() == list(range(1, len(objs) + 2))
    assert t["source_lines"].select("source_file", "line").n_unique() == t["source_lines"].height
    assert one(t["sessions"], session_key=session_id(TINY))["line_count"] == len(objs) + 1


BIG = CODEX / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


def test_a_remote_compaction_is_a_compaction_and_its_estimate_no_response(tables):
    objs = load(BIG)
    at = [n for n, o in enumerate(objs, 1) if o["type"] == "compacted"]
    comps = rows(tables["compactions"], session_key=session_id(BIG))
    assert comps["position"].to_list() == [f"line:{n}" for n in at]
    row = comps.row(0, named=True)
    message = objs[at[0] - 1]["payload"]["message"]
    assert row["summary"] == (message or None) and row["compaction_kind"] == "full"
    assert json.loads(row["native"]) == objs[at[0] - 1]
    assert one(tables["records"], record_id=row["record_id"])["kind"] == "compaction"
    assert rows(tables["parts"], record_id=row["record_id"]).height == 0  # the summary is not a message
    # the token_count just before it: last usage an estimate (input and output 0), not a response
    estimates = [n for n, o in enumerate(objs, 1) if (o.get("payload") or {}).get("type") == "token_count"
                 and (o["payload"].get("info") or {}).get("last_token_usage", {}).get("input_tokens") == 0
                 and o["payload"]["info"]["last_token_usage"]["output_tokens"] == 0]
    assert estimates
    first = one(tables["source_lines"], source_file=shown(BIG), line=estimates[0])
    assert first["status"] == "mapped"
    assert one(tables["records"], record_id=first["record_id"])["inference_id"] is None
    usage_lines = set(rows(tables["inferences"], session_key=session_id(BIG))["usage_source_line"])
    assert not usage_lines & set(estimates)


def test_records_carry_the_turn_and_model_they_were_written_in(tables):
    path = CODEX / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
    objs = load(path)
    turn = model = None
    expected = {}
    for n, o in enumerate(objs, 1):
        p = o.get("payload") or {}
        if o["type"] == "turn_context":
            turn, model = p.get("turn_id", turn), p["model"]
        elif p.get("type") == "task_started":
            turn = p["turn_id"]
        expected[n] = (turn, model)
    recs = rows(tables["records"], session_key=session_id(path))
    for rec in recs.iter_rows(named=True):
        assert rec["turn_id"] == expected[rec["source_line"]][0], rec["position"]
        if rec["author"] == "model":
            assert rec["model"] == expected[rec["source_line"]][1], rec["position"]
    assert recs["seq"].to_list() == list(range(1, recs.height + 1))
    assert recs.sort("seq")["source_line"].is_sorted()


def test_a_line_that_is_not_an_object_is_rejected_and_the_rest_mapped(tmp_path):
    src = tmp_path / "sessions"
    src.mkdir()
    text = TINY.read_text(encoding="utf-8").splitlines()
    broken = [*text[:3], '{"timestamp":"2026-02-23T12:19:40.000Z","type":"event_msg","payl', "[1, 2]", *text[3:]]
    (src / TINY.name).write_text("\n".join(broken) + "\n\n")  # a blank line at the end is not a line
    batch.convert([src], tmp_path / "out")
    t = read_tables(tmp_path / "out")
    lines = t["source_lines"].sort("line")
    assert lines.height == len(broken)
    assert lines.filter(pl.col("status") == "rejected")["line"].to_list() == [4, 5]
    assert t["rejects"].sort("line")["reason"].to_list() == ["invalid_json", "not_an_object"]
    assert t["rejects"].sort("line")["raw"].to_list() == [broken[3].encode(), broken[4].encode()]
    assert one(t["losses"], category="rejected_lines")["count"] == 2
    assert rows(lines, status="mapped").height + rows(lines, status="duplicate").height == len(text)


EXECUTE = {"shell", "container.exec", "exec_command", "write_stdin", "local_shell"}  # tool kind execute by name
TURN_STATES = {"task_started": "running", "turn_started": "running", "task_complete": "idle",
               "turn_complete": "idle", "turn_aborted": "idle"}


def _outputs(objs: list[dict]) -> dict[str, str]:
    """call_id -> the text of its first output (a string, or the texts of an array joined)."""
    found = {}
    for o in objs:
        p = o.get("payload") or {}
        if p.get("type") in ("function_call_output", "custom_tool_call_output") and p["call_id"] not in found:
            out = p["output"]
            found[p["call_id"]] = out if isinstance(out, str) else "\n".join(
                b["text"] for b in out if b.get("text") is not None)
    return found


def test_old_shell_exit_codes_and_durations_come_from_the_output_metadata(tables):
    objs = load(OLD)
    names = {o["payload"]["call_id"]: o["payload"]["name"] for o in objs if o["payload"].get("type") == "function_call"}
    expected = {}
    for call_id, text in _outputs(objs).items():
        try:
            meta = json.loads(text)["metadata"]
        except (ValueError, KeyError, TypeError):
            continue  # update_plan's "Plan updated"
        expected[call_id] = (meta["exit_code"], round(meta["duration_seconds"] * 1000))
    assert {code for code, _ in expected.values()} >= {0, 1, 2}  # the real file holds failed commands
    mine = rows(tables["tool_calls"], session_key=session_id(OLD))
    for row in mine.iter_rows(named=True):
        if row["call_id"] in expected:
            code, ms = expected[row["call_id"]]
            assert (row["exit_code"], row["duration_ms"], row["exit_code_source"]) == (code, ms, "output_metadata")
            assert row["is_error"] == (code != 0)
            assert row["status"] == ("error" if code != 0 else "completed")
        else:
            assert names[row["call_id"]] != "shell"
            assert row["exit_code"] is None and row["is_error"] is None and row["status"] == "completed"
    assert mine.filter(pl.col("exit_code").is_not_null()).height == len(expected)
    # every exit code this file writes is read: no loss
    assert rows(tables["losses"], session_key=session_id(OLD), category="shell_exit_code").height == 0


def test_shell_calls_whose_exit_code_is_not_read_are_a_loss(tables):
    # the 0.104 files are sanitized: each output is "[REDACTED_OUTPUT ...]", its exit code unreadable
    for path in REAL:
        objs = load(path)
        names = {o["payload"]["call_id"]: o["payload"]["name"] for o in objs
                 if o["payload"].get("type") in ("function_call", "custom_tool_call")}
        outputs = _outputs(objs)
        unread = [c for c, name in names.items() if name in EXECUTE and c in outputs
                  and not any(w in outputs[c] for w in ('"exit_code"', "Exit code: ", "Process exited with code ",
                                                       "Process running with session ID "))]
        found = rows(tables["losses"], session_key=session_id(path), category="shell_exit_code")
        assert found["count"].to_list() == ([len(unread)] if unread else []), path.name
        lost = rows(tables["tool_calls"], session_key=session_id(path)).filter(
            pl.col("call_id").is_in(unread))
        assert lost["exit_code"].null_count() == len(unread)


def test_exit_codes_from_plain_text_headers_and_exec_command_end(tmp_path):
    # authored: no fixture holds a plain-text output with its header (the 0.104 files are redacted)
    # nor an exec_command_end joined to a call; shapes after reference §5 and §6
    meta = load(TINY)[0]
    sid = "019c9000-0000-7000-8000-0000000000e1"
    at = "2026-02-23T14:00:00.000Z"

    def line(payload: dict, kind: str = "response_item") -> dict:
        return {"timestamp": at, "type": kind, "payload": payload}

    def call(call_id: str, name: str = "exec_command") -> dict:
        return line({"type": "function_call", "name": name, "arguments": "{\"cmd\":\"make\"}", "call_id": call_id})

    def output(call_id: str, text: str) -> dict:
        return line({"type": "function_call_output", "call_id": call_id, "output": text})

    lines = [
        {**meta, "payload": {**meta["payload"], "id": sid}},
        call("c1"), output("c1", "Exit code: 1\nWall time: 0.25 seconds\nOutput:\nboom\n"),
        call("c2"), output("c2", "Chunk ID: 1a2b\nWall time: 1.5 seconds\nProcess exited with code 0\n"
                                 "Original token count: 3\nOutput:\nok\nExit code: 7\n"),
        call("c3"), output("c3", "Chunk ID: 3c4d\nWall time: 10.0 seconds\nProcess running with session ID 4242\n"
                                 "Original token count: 0\nOutput:\n"),
        call("c4", "write_stdin"), output("c4", "Chunk ID: 5e6f\nWall time: 5.0 seconds\n"
                                                "Process running with session ID 4242\nOutput:\n"),
        line({"type": "exec_command_end", "call_id": "c3", "turn_id": "t1", "command": ["make"], "cwd": "/r",
              "exit_code": 3, "duration": {"secs": 12, "nanos": 500_000_000}, "aggregated_output": ""}, "event_msg"),
        call("c5"), output("c5", "the words Exit code: 4 in a command's own output\n"),
        call("c6"),  # no output yet
    ]
    expected = {  # call_id -> (exit_code, exit_code_source, duration_ms, status, is_error)
        "c1": (1, "output_text", 250, "error", True),
        "c2": (0, "output_text", 1500, "completed", False),
        "c3": (3, "exec_command_end", 12500, "error", True),
        "c4": (None, None, 5000, "completed", None),
        "c5": (None, None, None, "completed", None),
        "c6": (None, None, None, "pending", None),
    }
    src = tmp_path / "sessions"
    src.mkdir()
    (src / f"rollout-2026-02-23T14-00-00-{sid}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines))
    batch.convert([src], tmp_path / "out")
    t = read_tables(tmp_path / "out")
    got = {r["call_id"]: (r["exit_code"], r["exit_code_source"], r["duration_ms"], r["status"], r["is_error"])
           for r in t["tool_calls"].iter_rows(named=True)}
    assert got == expected
    # c5 alone has an output whose exit code is not read; c4's process outlived the call; c6 has no output
    assert one(t["losses"], session_key=sid, category="shell_exit_code")["count"] == 1
    assert t["source_lines"]["status"].to_list() == ["mapped"] * len(lines)
    end = one(t["records"], session_key=sid, native_subtype="exec_command_end")
    assert end["kind"] == "unknown" and json.loads(end["native"]) == lines[9]


def test_turn_starts_and_ends_are_records_with_their_turn_and_state(tables):
    for path in [*REAL, COMPOSITE]:
        objs = load(path)
        turns, states, state = {}, [], None
        for n, o in enumerate(objs, 1):
            p = o.get("payload") or {}
            if o["type"] == "event_msg" and p.get("type") in TURN_STATES:
                turns[n] = (p["type"], p.get("turn_id"))
                value = TURN_STATES[p["type"]]
                if value != state:
                    states.append((n, value, state))
                state = value
        recs = rows(tables["records"], session_key=session_id(path))
        mine = recs.filter(pl.col("source_line").is_in(list(turns)))
        assert mine.height == len(turns), path.name
        for rec in mine.iter_rows(named=True):
            ptype, turn_id = turns[rec["source_line"]]
            assert rec["kind"] == ("session_info" if TURN_STATES[ptype] == "running" else "turn_stats")
            assert rec["native_subtype"] == ptype and rec["author"] == "harness"
            if turn_id is not None:
                assert rec["turn_id"] == turn_id
            assert json.loads(rec["native"]) == objs[rec["source_line"] - 1]
        # last_agent_message repeats the assistant item: no part, so its text is counted once
        assert tables["parts"].filter(pl.col("record_id").is_in(mine["record_id"].implode())).height == 0
        events = rows(tables["session_events"], session_key=session_id(path), field="state").join(
            recs.select("record_id", "source_line"), on="record_id").sort("seq")
        assert list(events.select("source_line", "value", "previous_value").iter_rows()) == states, path.name
        assert set(events["event_kind"]) <= {"session_info"}
        assert events["seq"].to_list() == recs.filter(pl.col("record_id").is_in(events["record_id"].implode()))\
            .sort("seq")["seq"].to_list()
    big = rows(tables["records"], session_key=session_id(BIG))
    assert rows(big, kind="turn_stats").height == sum(
        (o.get("payload") or {}).get("type") == "task_complete" for o in load(BIG))


CONTEXT_SETTINGS = {"model": "model", "approval_policy": "approval_policy", "sandbox_policy": "sandbox_policy",
                    "reasoning_effort": "effort", "cwd": "cwd"}


def test_turn_context_settings_are_config_changes_where_they_change(tables):
    # Codex writes a turn_context before every request or turn: each setting is an event only where
    # its value differs from the one before it in the file (the first is a change from nothing)
    seen_change = False
    for path in REAL:
        objs = load(path)
        last, expected = {}, []
        for n, o in enumerate(objs, 1):
            if o["type"] != "turn_context":
                continue
            for field, key in CONTEXT_SETTINGS.items():
                value = o["payload"].get(key)
                if value is None:
                    continue
                if value != last.get(field):
                    expected.append((n, field, value, last.get(field)))
                last[field] = value
        assert expected, path.name
        seen_change |= any(prev is not None for *_, prev in expected)
        recs = rows(tables["records"], session_key=session_id(path)).select("record_id", "source_line")
        events = rows(tables["session_events"], session_key=session_id(path), event_kind="config_change").join(
            recs, on="record_id").sort("source_line", "field")

        def native(text):  # a sandbox policy object is kept as JSON, a string as itself
            return json.loads(text) if text is not None and text.startswith("{") else text

        got = [(n, f, native(v), native(p)) for n, f, v, p in
               events.select("source_line", "field", "value", "previous_value").iter_rows()]
        assert got == sorted(expected, key=lambda e: (e[0], e[1])), path.name
        assert set(events["native_type"]) == {"turn_context"}
    assert seen_change  # the real 0.104 session changes its reasoning effort mid-session
