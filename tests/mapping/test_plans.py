"""Plans, memory, instructions, capability changes and request context (registry entry items).

Authored fixtures (tests/fixtures/registry/plans, see its README) pin the mapping rules; the real
corpus (tests/fixtures/corpus) is asserted separately wherever it has the case.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import batch
from conftest import FIXTURES

AUTHORED = FIXTURES / "registry" / "plans"
CORPUS = FIXTURES / "corpus"
TABLES = ("plans", "plan_items", "instructions", "capability_changes", "memory_changes", "request_contexts")

# Corpus files that exercise this area (converted once for the module).
CORPUS_SOURCES = (
    CORPUS / "daaain-claude-code-log" / "-experiments-worktrees",  # 2.1.114: Task tools, task_reminder, deferred_tools_delta
    CORPUS / "marot-spotter" / "subagent.jsonl",  # 2.1.38: ExitPlanMode with a plan file
    CORPUS / "chiphuyen-sniffly" / "ba79134d-b6e9-4867-af0c-6941038c9e4b.jsonl",  # 1.0.17: TodoWrite with id, priority
    CORPUS / "d-kimuson-claude-code-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",  # 1.0.98: TodoWrite activeForm
    CORPUS / "rcgray-claude-code-bug-phantom-reads-17407" / "schema-13-216",  # 2.1.6: TodoWrite, cleared todos snapshot
    CORPUS / "daaain-claude-code-log" / "-experiments-ideas",  # 2.1.42: only empty todos snapshots
)

SID_PLAN_OLD = "a1a1a1a1-1111-4111-8111-111111111111"
SID_PLAN_NEW = "a2a2a2a2-2222-4222-8222-222222222222"
SID_TODOS = "b1b1b1b1-1111-4111-8111-111111111111"
SID_TASKS = "c1c1c1c1-1111-4111-8111-111111111111"
SID_REQUESTS = "d1d1d1d1-1111-4111-8111-111111111111"
SID_MEMORY = "e1e1e1e1-1111-4111-8111-111111111111"
SID_TOOLS = "f1f1f1f1-1111-4111-8111-111111111111"
MEMDIR = "/home/user/.claude/projects/-home-user-project/memory"

REAL_TASKS = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
REAL_PLAN = "491e126e-1e71-469c-ade2-fcc8af567c74"


def _convert(sources: list[Path], out: Path) -> dict[str, pl.DataFrame]:
    batch.convert(sources, out)
    names = TABLES + ("records", "tool_calls", "inferences")
    return {name: pl.read_parquet(out / name / "*.parquet") for name in names}


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    return _convert([AUTHORED], tmp_path_factory.mktemp("plans") / "out")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    return _convert(list(CORPUS_SOURCES), tmp_path_factory.mktemp("plans-corpus") / "out")


def rows(df: pl.DataFrame, **eq) -> list[dict]:
    for name, value in eq.items():
        df = df.filter(pl.col(name) == value)
    return df.to_dicts()


def one(df: pl.DataFrame, **eq) -> dict:
    found = rows(df, **eq)
    assert len(found) == 1, (eq, found)
    return found[0]


# ----------------------------------------------------------------------------- plans: documents


def test_exit_plan_mode_plan_id_from_the_plan_file_else_slug_else_call(authored):
    plans = authored["plans"]
    approved = one(plans, call_id="toolu_01PlanRev")
    assert approved["plan_type"] == "document"
    assert approved["plan_id"] == "quiet-river-otter"
    assert approved["source"] == "/home/user/.claude/plans/quiet-river-otter.md"
    assert approved["content"].startswith("# Rename the config loader (revised)")
    assert approved["op"] == "replace" and approved["call_status"] == "completed"
    # Rejected by the user: no plan file in the result, so the record's slug names the plan; the input
    # keeps the text; the call is denied, not failed (its text is the rejection's)
    rejected = one(plans, call_id="toolu_01PlanNew")
    assert (rejected["plan_id"], rejected["source"], rejected["call_status"]) == ("quiet-river-otter", None, "denied")
    assert rejected["content"].startswith("# Rename the config loader\n")
    assert json.loads(rejected["result_native"]).startswith("Error: The user doesn't want to proceed")
    # 1.0.x: neither a plan file nor a slug, so the call_id is the plan id.
    old = one(plans, call_id="toolu_01PlanOld")
    assert (old["plan_id"], old["source"], old["item_count"]) == ("toolu_01PlanOld", None, None)
    assert old["content"] == json.loads(old["result_native"])["plan"]
    assert authored["plan_items"].filter(pl.col("call_id").str.starts_with("toolu_01Plan")).height == 0


def test_corpus_exit_plan_mode_names_the_plan_file(corpus):
    # marot-spotter subagent.jsonl (2.1.38): input {}, toolUseResult {plan: null, isAgent, filePath}
    plan = one(corpus["plans"], session_key=REAL_PLAN, tool_name="ExitPlanMode")
    assert plan["plan_id"] == "humble-seeking-umbrella"
    assert plan["source"] == "/home/marco/.claude/plans/humble-seeking-umbrella.md"
    assert plan["content"] is None
    assert (plan["plan_type"], plan["call_status"]) == ("document", "completed")
    assert json.loads(plan["native"])["name"] == "ExitPlanMode"


# ----------------------------------------------------------------------------- plans: todos


def test_todowrite_versions_and_changed_todos_snapshots(authored):
    plans = authored["plans"].filter(pl.col("session_key") == SID_TODOS)
    plan_id = f"todos:{SID_TODOS}-agent-{SID_TODOS}"
    assert set(plans.get_column("plan_id")) == {plan_id}
    assert plans.select("tool_name", "plan_source", "op", "item_count", "call_status").rows() == [
        ("TodoWrite", "tool_call", "replace", 2, "completed"),
        ("TodoWrite", "tool_call", "replace", 2, "completed"),
        # the initial [] and the snapshot repeating the first TodoWrite are no change; the cleared list is
        (None, "todos_snapshot", "snapshot", 0, None),
        ("TodoWrite", "tool_call", "replace", 1, "pending"),
    ]
    items = authored["plan_items"].filter(pl.col("call_id") == "toolu_01Todo1")
    assert items.select("item_index", "content", "status", "active_form").rows() == [
        (0, "Write the parser", "in_progress", "Writing the parser"),
        (1, "Add tests", "pending", "Adding tests"),
    ]
    assert set(items.get_column("plan_id")) == {plan_id}


def test_corpus_todowrite_items_keep_id_priority_and_active_form(corpus):
    plans, items = corpus["plans"], corpus["plan_items"]
    sid = "ba79134d-b6e9-4867-af0c-6941038c9e4b"  # 1.0.17: todos with id and priority
    writes = plans.filter((pl.col("session_key") == sid) & (pl.col("tool_name") == "TodoWrite"))
    assert writes.height == 4 and set(writes.get_column("plan_type")) == {"items"}
    first = items.filter(pl.col("call_id") == writes.get_column("call_id")[0]).sort("item_index")
    assert first.get_column("entry_id").to_list()[:2] == ["1", "2"]
    assert first.row(0, named=True)["priority"] == "high"
    assert first.row(0, named=True)["content"] == "Set up project dependencies (requirements.txt)"
    sid = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"  # 1.0.98: activeForm, no id
    item = items.filter(pl.col("session_key") == sid).row(0, named=True)
    assert item["active_form"] == "Analyzing codebase structure and files" and item["entry_id"] is None


def test_corpus_todos_snapshots_give_rows_only_on_change(corpus):
    plans = corpus["plans"]
    # 2.1.6: two TodoWrite calls, then a prompt whose todos list was cleared
    sid = "e74cb27e-9956-4d4f-ba44-f9bcce38e732"
    per = plans.filter(pl.col("session_key") == sid)
    assert per.select("plan_source", "item_count").rows() == [("tool_call", 2), ("tool_call", 2), ("todos_snapshot", 0)]
    # 2.1.42: seven prompts carry todos: [] and no TodoWrite: nothing changes
    assert plans.filter(pl.col("session_key") == "03eb5929-52b3-4b13-ada3-b93ae35806b8").height == 0


# ----------------------------------------------------------------------------- plans: Task tools


def test_task_tools_items_with_entry_id_owner_and_blocked_by(authored):
    plans, items = authored["plans"], authored["plan_items"]
    plan_id = f"tasks:{SID_TASKS}"
    task_rows = plans.filter(pl.col("plan_id") == plan_id)
    assert task_rows.select("tool_name", "op").rows() == [
        ("TaskCreate", "create"), ("TaskCreate", "create"), ("TaskUpdate", "update"), ("TaskGet", "read"),
        (None, "snapshot"), ("TaskUpdate", "update"),
    ]
    created = one(items, call_id="toolu_01Task2")
    assert (created["entry_id"], created["content"], created["description"], created["status"]) == (
        "2", "Backfill the column", "Fill the column in batches.", None)
    update = one(items, call_id="toolu_01Task3")
    assert (update["entry_id"], update["owner"], update["blocked_by"], update["content"]) == ("2", "alice", ["1"], None)
    got = one(items, call_id="toolu_01Task4")
    assert (got["entry_id"], got["status"], got["blocked_by"], got["blocks"]) == ("2", "pending", ["1"], [])
    reminder = items.filter((pl.col("plan_id") == plan_id) & pl.col("call_id").is_null()).sort("item_index")
    assert reminder.select("entry_id", "blocks", "blocked_by", "owner").rows() == [
        ("1", ["2"], [], None), ("2", [], ["1"], "alice")]
    # the subagent updates the same task list
    sub = one(items, call_id="toolu_01Sub1")
    assert (sub["plan_id"], sub["entry_id"], sub["status"], sub["previous_status"]) == (
        plan_id, "1", "completed", "pending")
    assert sub["session_key"] == f"{SID_TASKS}/a1b2c3d4e5f6a7b8c"


def test_corpus_task_tools_and_task_reminder(corpus):
    plans, items = corpus["plans"], corpus["plan_items"]
    plan_id = f"tasks:{REAL_TASKS}"
    main = plans.filter(pl.col("session_key") == REAL_TASKS)
    counts = dict(main.group_by("op").len().iter_rows())
    assert counts == {"create": 6, "update": 12, "snapshot": 2}
    assert set(main.get_column("plan_id")) == {plan_id}
    created = items.filter(pl.col("call_id").is_in(
        main.filter(pl.col("op") == "create").get_column("call_id").implode()))
    assert sorted(created.get_column("entry_id")) == ["1", "2", "3", "4", "5", "6"]
    owner = items.filter((pl.col("session_key") == REAL_TASKS) & (pl.col("owner") == "alice")
                         & pl.col("previous_status").is_not_null()).row(0, named=True)
    assert (owner["entry_id"], owner["status"], owner["previous_status"]) == ("1", "in_progress", "pending")
    reminder = one(main, plan_source="task_reminder")
    assert reminder["item_count"] == json.loads(reminder["native"])["itemCount"] == 6
    listed = items.filter(pl.col("call_id") == one(main, tool_name="TaskList")["call_id"])
    assert listed.height == 6 and listed.get_column("blocked_by").to_list() == [[]] * 6
    # a teammate subagent reads and updates the same list; its TaskGet has no toolUseResult
    sub = plans.filter(pl.col("session_key") == f"{REAL_TASKS}/a52886dc180afb356")
    assert sub.select("tool_name", "plan_id", "item_count").rows() == [
        ("TaskGet", plan_id, 0), ("TaskUpdate", plan_id, 1)]


def test_plan_rows_are_keyed_and_items_match_counts(authored, corpus):
    for t in (authored, corpus):
        plans, items = t["plans"], t["plan_items"]
        assert plans.select("record_id", "call_id").is_duplicated().sum() == 0
        assert items.select("record_id", "call_id", "item_index").is_duplicated().sum() == 0
        counted = items.group_by("record_id", "call_id").len()
        joined = plans.filter(pl.col("plan_type") == "items").join(
            counted, on=["record_id", "call_id"], how="left", nulls_equal=True)
        assert joined.filter(pl.col("item_count") != pl.col("len").fill_null(0)).height == 0


# ----------------------------------------------------------------------------- request context


def test_request_context_maps_base_keep_tail_params_and_digest(authored):
    ctx = authored["request_contexts"].filter(pl.col("session_key") == SID_REQUESTS)
    first, second = ctx.to_dicts()
    assert (first["api_request_id"], first["request_ref"], first["inference_id"]) == ("areq-1", "req_01Ctx1", "msg_01Ctx1")
    assert (first["prefix_inference_id"], first["prefix_count"]) == (None, 0)
    # shaped like a SHA-256, but nothing shows which bytes were hashed: kept as recorded only
    assert first["request_digest"] is None
    assert first["request_digest_native"] == json.loads(first["native"])["requestDigest"]
    assert first["request_digest_native"].lower().endswith("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
    assert json.loads(first["params"])["max_tokens"] == 32000
    assert json.loads(first["tail_entries"]) == [
        {"hash": "blob-h1", "message": {"role": "user", "content": "What does main.py do?"}}]
    # base → the base request's response; keep → count; tail hashes resolved in order, one missing
    assert (second["base_ref"], second["prefix_inference_id"], second["prefix_count"]) == ("areq-1", "msg_01Ctx1", 1)
    assert second["inference_id"] == "msg_01Ctx2"
    assert second["tail_hashes"] == ["blob-h2", "blob-h3", "blob-gone"]
    entries = json.loads(second["tail_entries"])
    assert [e["message"] and e["message"]["role"] for e in entries] == ["assistant", "user", None]
    assert second["unresolved_tail_count"] == 1
    # md5 is not a SHA-256 either: no request_digest, the value kept as recorded
    assert second["request_digest"] is None
    assert second["request_digest_native"].startswith("md5:")
    assert json.loads(second["native"])["requestDigest"].startswith("md5:")
    assert (second["query_source"], second["shape_hash"]) == ("repl_main_thread", "shape-1")


def test_request_params_go_to_their_inference_and_records_are_request_context(authored):
    inferences = authored["inferences"].filter(pl.col("session_key") == SID_REQUESTS)
    params = {r["inference_id"]: json.loads(r["params"]) for r in inferences.to_dicts() if r["params"]}
    assert params["msg_01Ctx1"]["max_tokens"] == 32000
    assert params["msg_01Ctx2"]["max_tokens"] == 16000
    kinds = authored["records"].filter(pl.col("native_type").str.starts_with("api-request"))
    assert set(kinds.get_column("kind")) == {"request_context"}
    assert set(kinds.get_column("author")) == {"harness"}


def test_corpus_has_no_request_capture_records(corpus):
    assert corpus["request_contexts"].height == 0
    assert corpus["records"].filter(pl.col("native_type").str.starts_with("api-request")).height == 0


# ----------------------------------------------------------------------------- instructions and memory


def test_instruction_files_map_type_to_scope(authored):
    files = authored["instructions"].filter(
        (pl.col("session_key") == SID_MEMORY) & (pl.col("instruction_kind") == "instruction_file"))
    assert files.select("attachment_type", "file_index", "file_type", "scope").rows() == [
        ("instructions", 0, "User", "user"),
        ("instructions", 1, "Project", "project"),
        ("instructions", 2, "Local", "local"),
        ("instructions", 3, "Managed", "managed"),
        ("instructions", 4, "AutoMem", "memory"),
        ("instructions", 5, "Rule", None),
        ("nested_memory", None, "Project", "project"),
    ]
    memory = one(files, file_type="AutoMem")
    assert (memory["path"], memory["content"]) == (f"{MEMDIR}/MEMORY.md", "- [Preferences](prefs.md)")
    nested = one(files, attachment_type="nested_memory")
    assert (nested["display_path"], nested["content"]) == ("src/CLAUDE.md", "src/ is the web app.")
    assert json.loads(nested["native"])["type"] == "nested_memory"


def test_deferred_tools_delta_is_a_tool_definitions_instruction(authored):
    tools = authored["instructions"].filter(pl.col("session_key") == SID_TOOLS)
    assert set(tools.get_column("instruction_kind")) == {"tool_definitions"}
    # the third delta changes no tool definition (only MCP server state): no row
    assert tools.select("added", "removed", "readded").rows() == [
        (["WebFetch", "mcp__notes__search"], [], []),
        ([], ["mcp__notes__search"], ["WebFetch"]),
    ]
    assert tools.get_column("content").to_list() == ["WebFetch\nmcp__notes__search", None]


def test_corpus_deferred_tools_delta(corpus):
    row = one(corpus["instructions"], session_key=REAL_TASKS)
    native = json.loads(row["native"])
    assert (row["instruction_kind"], row["attachment_type"]) == ("tool_definitions", "deferred_tools_delta")
    assert row["added"] == native["addedNames"] and len(row["added"]) == 37
    assert row["removed"] == [] and row["readded"] is None
    # this delta lists no failed or needs-auth MCP server
    assert corpus["capability_changes"].height == 0


def test_capability_changes_on_change_only(authored):
    changes = authored["capability_changes"].filter(pl.col("session_key") == SID_TOOLS)
    assert changes.select("position", "server", "op", "error_code", "error").rows() == [
        ("line:1", "notes", "fail", "ECONNREFUSED", "connect failed"),
        ("line:1", "calendar", "needs_auth", None, None),
        # line 3 lists calendar again (a repeat); line 5 lists notes failing again after line 3 cleared it
        ("line:5", "notes", "fail", None, None),
    ]
    assert json.loads(changes.row(0, named=True)["native"])["errorCode"] == "ECONNREFUSED"
    assert json.loads(changes.row(2, named=True)["native"]) == "notes"


def test_memory_changes_store_scope_op_and_status(authored):
    changes = authored["memory_changes"].filter(pl.col("session_key") == SID_MEMORY)
    by_call = {r["cause_call_id"]: r for r in changes.to_dicts()}
    expected = {
        "toolu_01Mem1": ("auto_memory", "project", "add", "applied", True),  # Write create, memdirStamped
        "toolu_01Mem2": ("auto_memory", "project", "update", "applied", True),  # Edit
        "toolu_01Mem3": ("auto_memory", "project", None, "failed", None),  # denied Write
        "toolu_01Mem4": ("agent_memory", "agent", "update", "applied", None),  # Write update, agent memory
        "toolu_01Mem5": ("auto_memory", "project", "add", "applied", True),  # custom memory dir, stamped
        "toolu_01Mem7": ("auto_memory", "project", None, "unknown", None),  # no result in the capture
        None: ("auto_memory", "project", "add", "applied", None),  # memory_saved: the path is not written before
    }
    assert set(by_call) == set(expected)  # the write to src/app.py is not a memory change
    for call_id, want in expected.items():
        r = by_call[call_id]
        assert (r["store"], r["scope"], r["op"], r["status"], r["is_memdir_stamped"]) == want, call_id
    assert by_call["toolu_01Mem4"]["agent_type"] == "code-reviewer"
    assert by_call["toolu_01Mem1"]["target_path"] == f"{MEMDIR}/prefs.md"
    assert by_call[None]["target_path"] == f"{MEMDIR}/feedback_tabs.md"
    assert (by_call[None]["evidence"], by_call[None]["tool_name"]) == ("memory_saved", None)
    # the change is observed at the result; the cause stays the call
    calls = authored["tool_calls"].filter(pl.col("call_id") == "toolu_01Mem1")
    assert by_call["toolu_01Mem1"]["record_id"] == calls.get_column("result_record_id")[0]


def test_corpus_has_no_memory_writes(corpus):
    assert corpus["memory_changes"].height == 0
