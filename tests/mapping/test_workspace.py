"""Workspace, version control, file changes, checkpoints and usage summaries (registry entry,
Workspace and VCS; Notes: cost-state).

Authored scenarios live in tests/fixtures/registry/workspace (see its README.md: authored tests
do not qualify a version); the real corpus (tests/fixtures/corpus) covers what it holds:
file-history snapshots, Edit/Write/MultiEdit results, a cwd change and subagent worktree sidecars.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pytest

import batch
from conftest import CORPUS, FIXTURES, older

REGISTRY = FIXTURES / "registry" / "workspace"
TABLES = ("vcs_events", "file_changes", "workspace_states", "checkpoint_files", "usage_summaries", "records")

GIT_SID = "5e0c0001-0000-4000-8000-000000000001"
FILES_SID = "5e0c0002-0000-4000-8000-000000000002"
WORKSPACE_SID = "5e0c0003-0000-4000-8000-000000000003"
COST_SID = "5e0c0004-0000-4000-8000-000000000004"
EMPTY_COST_SID = "5e0c0005-0000-4000-8000-000000000005"
CHECKPOINT_SID = "5e0c0006-0000-4000-8000-000000000006"
WORKTREES_SID = "ef958aa1-0e93-49f0-bb71-150f63befcd1"


def _read(out: Path) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(out / name / "*.parquet") for name in TABLES}


def _convert(src: Path, out: Path) -> dict[str, pl.DataFrame]:
    batch.convert([src], out)
    return _read(out)


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    return _convert(REGISTRY, tmp_path_factory.mktemp("workspace") / "out")


@pytest.fixture(scope="module")
def corpus(corpus_tables: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    return {name: corpus_tables[name] for name in TABLES}


def _rows(df: pl.DataFrame, **eq) -> list[dict]:
    for name, value in eq.items():
        df = df.filter(pl.col(name).is_null() if value is None else pl.col(name) == value)
    return df.to_dicts()


def _one(df: pl.DataFrame, **eq) -> dict:
    rows = _rows(df, **eq)
    assert len(rows) == 1, (eq, rows)
    return rows[0]


def _bash(n: int) -> str:
    return f"toolu_01Bash{n:014d}"


# --- version control -------------------------------------------------------------------------


def test_a_commit_on_a_bash_result_is_a_vcs_event_parsed_from_the_output(authored):
    row = _one(authored["vcs_events"], session_key=GIT_SID, call_id=_bash(1))
    assert row["action"] == "commit"
    assert row["evidence"] == "parsed_output"
    assert row["native_field"] == "gitOperation.commit"
    assert row["native_action"] == "committed"
    assert (row["commit_id"], row["branch"], row["tool_name"]) == ("3f9c2d1", "fix-cart", "Bash")
    assert json.loads(row["native"]) == {"sha": "3f9c2d1", "kind": "committed", "branch": "fix-cart"}
    amended = _one(authored["vcs_events"], session_key=GIT_SID, call_id=_bash(12))
    assert (amended["action"], amended["native_action"], amended["commit_id"]) == ("commit", "amended", "9a8b7c6")


def test_one_git_operation_with_several_parts_gives_one_row_per_part(authored):
    rows = _rows(authored["vcs_events"], session_key=GIT_SID, call_id=_bash(2))
    assert [r["action"] for r in rows] == ["push", "pr_open"]
    push, pr = rows
    assert (push["branch"], push["native_action"]) == ("fix-cart", None)
    assert (pr["pr_number"], pr["pr_url"]) == (42, "https://github.com/acme/shop/pull/42")
    assert pr["repository"] == "acme/shop"
    assert push["record_id"] == pr["record_id"]


PR_ACTIONS = {
    "created": "pr_open", "edited": "pr_update", "merged": "pr_merge", "commented": "pr_comment",
    "closed": "pr_close", "reopened": "pr_reopen", "ready": "pr_ready", "draft": "pr_draft",
}


def test_pr_actions_map_as_the_registry_says(authored):
    prs = _rows(authored["vcs_events"], session_key=GIT_SID, native_field="gitOperation.pr")
    mapped = {r["native_action"]: r["action"] for r in prs}
    assert {k: v for k, v in mapped.items() if k in PR_ACTIONS} == PR_ACTIONS


def test_a_pr_action_without_a_mapping_keeps_its_native_value(authored):
    row = _one(authored["vcs_events"], session_key=GIT_SID, call_id=_bash(10))
    assert row["action"] is None
    assert row["native_action"] == "auto-merge-enabled"
    assert (row["pr_number"], row["pr_url"], row["repository"]) == (43, None, None)


def test_a_branch_operation_names_its_ref(authored):
    row = _one(authored["vcs_events"], session_key=GIT_SID, call_id=_bash(11))
    assert (row["action"], row["native_action"], row["branch"]) == ("branch", "merged", "main")


def test_pr_link_rewritten_at_each_exit_is_one_reported_row_per_distinct_link(authored):
    links = _rows(authored["vcs_events"], session_key=GIT_SID, action="pr_link")
    assert [(r["pr_number"], r["observation_count"]) for r in links] == [(41, 1), (42, 3)]
    for r in links:
        assert r["evidence"] == "reported"
        assert r["call_id"] is None
        assert r["repository"] == "acme/shop"
        assert json.loads(r["native"])["type"] == "pr-link"
    assert links[1]["pr_url"] == "https://github.com/acme/shop/pull/42"


# --- file changes ----------------------------------------------------------------------------


def test_successful_edits_and_writes_are_changes_by_the_model(authored):
    rows = _rows(authored["file_changes"], session_key=FILES_SID, source="tool_result")
    got = [(r["call_id"], r["tool_name"], r["path"], r["change_kind"], r["is_modified_by_user"]) for r in rows]
    assert got == [
        ("toolu_01Edit0000000000000001", "Edit", "/home/user/shop/cart.py", "edit", True),
        ("toolu_01Write000000000000001", "Write", "/home/user/shop/totals.py", "create", None),
        ("toolu_01Write000000000000002", "Write", "/home/user/shop/notes.md", "write", None),
    ]
    assert {r["cause_actor"] for r in rows} == {"model"}
    # the Write whose line kept no toolUseResult still counts; its native is null
    assert rows[2]["native"] is None
    assert json.loads(rows[0]["native"])["userModified"] is True


def test_a_failed_edit_is_not_a_change(authored):
    assert _rows(authored["file_changes"], call_id="toolu_01Edit0000000000000002") == []


def test_a_bash_edit_diff_gives_one_row_per_changed_file(authored):
    rows = _rows(authored["file_changes"], session_key=FILES_SID, call_id=_bash(1))
    assert [(r["file_index"], r["path"], r["change_kind"]) for r in rows] == [
        (0, "/home/user/shop/cart.py", "bash_edit"),
        (1, "/home/user/shop/new.py", "create"),
    ]
    for r in rows:
        assert (r["source"], r["tool_name"], r["cause_actor"]) == ("bash_edit_diff", "Bash", "model")
        assert (r["more_files"], r["more_files_count"], r["more_files_native"]) == (False, 0, "0")
    # a path listed in changedFiles without hunks in files[] is still a changed file
    codegen = _rows(authored["file_changes"], call_id=_bash(3))
    assert [r["path"] for r in codegen] == ["/home/user/shop/gen/a.ts", "/home/user/shop/gen/b.ts"]


@pytest.mark.parametrize(
    ("call", "more_files", "count", "native"),
    [
        (1, False, 0, "0"),  # a zero count maps to false and keeps the count
        (2, True, None, "true"),  # a boolean is kept as recorded
        (3, True, 3, "3"),  # a positive count maps to true and keeps the count
        (4, None, None, "-1"),  # negative: native kept, no boolean
        (5, None, None, "1.5"),  # nonintegral: native kept, no boolean
    ],
)
def test_more_files_is_normalized_as_the_registry_says(authored, call, more_files, count, native):
    rows = _rows(authored["file_changes"], session_key=FILES_SID, call_id=_bash(call))
    assert rows
    for r in rows:
        assert (r["more_files"], r["more_files_count"], r["more_files_native"]) == (more_files, count, native)


def test_a_diff_listing_no_file_is_kept_only_when_it_reports_more_files(authored):
    row = _one(authored["file_changes"], call_id=_bash(6))
    assert (row["path"], row["more_files"], row["more_files_count"]) == (None, True, 2)
    assert _rows(authored["file_changes"], call_id=_bash(7)) == []


def test_edited_text_file_is_an_external_observed_change(authored):
    row = _one(authored["file_changes"], session_key=FILES_SID, source="edited_text_file")
    assert (row["cause_actor"], row["is_observed"], row["change_kind"]) == ("external", True, "external_edit")
    assert row["path"] == "/home/user/shop/README.md"
    assert row["call_id"] is None
    assert json.loads(row["native"])["snippet"].startswith("     1\t# Shop")


# --- workspace states ------------------------------------------------------------------------


def test_environment_snapshot_and_changes_give_cwd_roots_and_worktree_link(authored):
    rows = [r for r in _rows(authored["workspace_states"], session_key=WORKSPACE_SID)
            if r["source"].startswith("environment.")]
    got = [(r["source"], r["cwd"], r["roots"], r["is_worktree_linked"]) for r in rows]
    assert got == [
        ("environment.snapshot", "/home/user/shop", [], False),
        ("environment.changes", None, ["/home/user/payments"], None),
        ("environment.changes", "/home/user/shop/.claude/worktrees/fix-cart", None, True),
    ]


def test_a_cwd_change_between_records_is_a_workspace_state(authored):
    rows = _rows(authored["workspace_states"], session_key=WORKSPACE_SID, source="record.cwd")
    assert [(r["cwd"], r["previous_cwd"]) for r in rows] == [
        ("/home/user/shop", None),
        ("/home/user/shop/.claude/worktrees/fix-cart", "/home/user/shop"),
        ("/home/user/shop", "/home/user/shop/.claude/worktrees/fix-cart"),
    ]
    assert [r["git_branch"] for r in rows] == ["main", "worktree-fix-cart", "main"]
    records = authored["records"].filter(pl.col("session_key") == WORKSPACE_SID)
    assert set(r["record_id"] for r in rows) <= set(records.get_column("record_id"))


def test_worktree_state_counts_only_when_its_value_changes(authored):
    rows = _rows(authored["workspace_states"], session_key=WORKSPACE_SID, source="worktree-state")
    assert [(r["is_worktree_linked"], r["worktree_path"]) for r in rows] == [
        (True, "/home/user/shop/.claude/worktrees/fix-cart"),
        (False, None),
    ]
    relocated = _one(authored["workspace_states"], session_key=WORKSPACE_SID, source="relocated")
    assert relocated["cwd"] == "/home/user/shop"


def test_workspace_states_are_in_file_order(authored):
    seqs = _rows(authored["workspace_states"], session_key=WORKSPACE_SID)
    ordered = [r["seq"] for r in seqs]
    assert ordered == sorted(ordered)


# --- checkpoints -----------------------------------------------------------------------------


def test_snapshot_files_carry_path_version_and_blob(authored):
    rows = _rows(authored["checkpoint_files"], session_key=CHECKPOINT_SID, native_type="file-history-snapshot")
    got = [(r["path"], r["version"], r["blob"], r["is_snapshot_update"]) for r in rows]
    assert got == [
        (None, None, None, False),  # a snapshot tracking no file is still a checkpoint
        ("cart.py", 1, "9d2eb25925049f64@v1", True),
        ("new file.py", 1, None, True),  # no backup: the file did not exist yet
    ]
    assert {r["checkpoint_kind"] for r in rows} == {"snapshot"}
    prompt = f"{CHECKPOINT_SID[:8]}-0000-4000-8000-000000000001"
    assert {r["message_id"] for r in rows} == {prompt}
    assert {r["message_record_id"] for r in rows} == {f"{CHECKPOINT_SID}:{prompt}"}
    # the update names the assistant line whose Edit added the backups
    assert rows[1]["trigger_record_id"] == f"{CHECKPOINT_SID}:msg:msg_01Edit9"


def test_a_file_history_delta_is_passed_through_as_an_unknown_kind(authored):
    # the registry entry names file-history-snapshot, not file-history-delta: no mapping is claimed
    assert _rows(authored["checkpoint_files"], native_type="file-history-delta") == []
    row = _one(authored["records"], session_key=CHECKPOINT_SID, native_type="file-history-delta")
    assert (row["kind"], row["position"]) == ("unknown", "line:6")
    native = json.loads(row["native"])
    assert (native["trackingPath"], native["backup"]["backupFileName"]) == ("src/totals.py", "989991897b936a8c@v1")
    assert native["backup"]["realParentDir"] == "/home/user/shop/src"


# --- usage summaries -------------------------------------------------------------------------


def test_cost_state_is_a_cumulative_session_usage_summary(authored):
    rows = _rows(authored["usage_summaries"], session_key=COST_SID)
    assert len(rows) == 2
    for r in rows:
        assert (r["scope"], r["is_cumulative"], r["includes_children"]) == ("session", True, None)
    first, latest = rows
    assert (first["is_latest"], latest["is_latest"]) == (False, True)
    assert latest["cost_usd"] == pytest.approx(1.25)
    assert (latest["input_uncached_tokens"], latest["output_total_tokens"]) == (380, 1416)
    assert (latest["cache_read_tokens"], latest["cache_write_tokens"]) == (108786, 9449)
    # only one model reports thinking tokens: the sum is over the models that report it
    assert (latest["thinking_tokens"], latest["web_search_requests"]) == (426, 1)
    assert latest["models"] == ["claude-haiku-4-5-20251001", "claude-opus-4-7"]
    assert (latest["duration_ms"], latest["api_duration_ms"], latest["api_duration_without_retries_ms"]) == (
        120000, 19000, 18500)
    assert (latest["tool_duration_ms"], latest["lines_added"], latest["lines_removed"]) == (20106, 12, 3)
    assert latest["has_unknown_model_cost"] is True
    assert latest["started_at"].isoformat() == "2026-09-20T10:09:20.924000+00:00"


def test_cost_state_without_model_usage_reports_no_tokens(authored):
    row = _one(authored["usage_summaries"], session_key=EMPTY_COST_SID)
    assert row["cost_usd"] == 0
    assert row["models"] == []
    assert row["input_uncached_tokens"] is None
    assert row["output_total_tokens"] is None


def test_keys_are_unique(authored, corpus):
    for tables in (authored, corpus):
        assert tables["file_changes"].select("record_id", "file_index").is_duplicated().sum() == 0
        assert tables["checkpoint_files"].select("record_id", "file_index").is_duplicated().sum() == 0
        assert tables["usage_summaries"].get_column("record_id").is_duplicated().sum() == 0
        assert tables["workspace_states"].select("session_key", "record_id", "source").is_duplicated().sum() == 0


# --- real corpus -----------------------------------------------------------------------------


def _corpus_lines():
    for path in sorted(CORPUS.rglob("*.jsonl")):
        name = "corpus/" + path.relative_to(CORPUS).as_posix()
        for n, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
            if raw.strip():
                yield name, n, json.loads(raw)


def _with_lines(df: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    return df.join(records.select("record_id", "source_file", "source_line"), on="record_id", how="left")


def test_corpus_checkpoint_files_match_the_snapshot_lines(corpus):
    expected = Counter()
    for name, n, obj in _corpus_lines():
        if obj.get("type") != "file-history-snapshot":
            continue
        backups = obj["snapshot"]["trackedFileBackups"]
        if not backups:
            expected[(name, n, None, None, None)] += 1
        for path, b in backups.items():
            expected[(name, n, path, b["version"], b["backupFileName"])] += 1
    assert sum(expected.values()) > 700
    rows = _with_lines(corpus["checkpoint_files"], corpus["records"])
    got = Counter(rows.select("source_file", "source_line", "path", "version", "blob").iter_rows())
    assert got == expected


def test_corpus_snapshot_references_resolve_to_prompts_and_editing_lines(corpus):
    # snapshot.messageId names the user prompt; the top-level messageId of an update names the
    # assistant line whose edit added the backup (2.0.55 .. 2.1.114)
    records = corpus["records"].select("record_id", native_type_ref="native_type", kind_ref="kind")
    rows = corpus["checkpoint_files"]
    prompts = rows.join(records, left_on="message_record_id", right_on="record_id")
    assert prompts.height > 500
    # a prompt, or the compact summary line that begins a turn after compaction (2.0.76, 2.1.39),
    # which folds into its compaction record
    assert set(prompts.select("native_type_ref", "kind_ref").iter_rows()) == {
        ("user", "message"), ("system", "compaction")}
    updates = rows.filter(pl.col("is_snapshot_update")).join(
        records, left_on="trigger_record_id", right_on="record_id")
    assert updates.height == rows.filter(pl.col("is_snapshot_update")).height
    assert set(updates.get_column("native_type_ref")) == {"assistant"}
    # a snapshot-only file (no prompt lines) keeps its checkpoints with unresolved references
    orphan = _with_lines(rows, corpus["records"]).filter(
        pl.col("source_file").str.ends_with("a95fea4a-b88a-4e49-ac07-4cc323d8700c.jsonl"))
    assert orphan.height == 4
    assert orphan.get_column("message_record_id").null_count() == 4


def test_corpus_every_successful_edit_or_write_is_a_model_file_change(corpus):
    names: dict[tuple[str, str], str] = {}
    seen: set[tuple[str, str]] = set()
    expected = set()
    for name, _, obj in _corpus_lines():
        content = (obj.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                names.setdefault((name, block["id"]), block["name"])
            elif block.get("type") == "tool_result" and (name, block.get("tool_use_id")) not in seen:
                key = (name, block.get("tool_use_id"))
                seen.add(key)
                ok = not block.get("is_error") and not isinstance(obj.get("toolUseResult"), str)
                if names.get(key) in ("Edit", "Write", "MultiEdit", "NotebookEdit") and ok:
                    expected.add(key)
    rows = _with_lines(corpus["file_changes"].filter(pl.col("source") == "tool_result"), corpus["records"])
    got = set(rows.select("source_file", "call_id").iter_rows())
    assert got == expected
    assert len(expected) > 150
    assert set(rows.get_column("cause_actor")) == {"model"}
    # userModified is recorded (false in this corpus) on Edit and MultiEdit results, 1.0.24 .. 2.1.114
    edits = rows.filter(pl.col("tool_name").is_in(["Edit", "MultiEdit"]) & pl.col("native").is_not_null())
    assert edits.height > 100
    assert edits.get_column("is_modified_by_user").to_list() == [False] * edits.height


def test_corpus_subagent_edits_without_tool_use_result_use_the_input_path(corpus):
    rows = corpus["file_changes"].filter(
        pl.col("session_key").str.starts_with(f"{WORKTREES_SID}/") & pl.col("native").is_null())
    assert rows.height == 14
    assert set(rows.get_column("change_kind")) == {"edit", "write"}
    assert all(p.startswith("-experiments/worktrees/.claude/worktrees/agent-") for p in rows.get_column("path"))


def test_corpus_cwd_change_inside_a_main_session(corpus):
    rows = _rows(corpus["workspace_states"], session_key=WORKTREES_SID, source="record.cwd")
    assert [r["cwd"] for r in rows] == [
        "-experiments/worktrees",
        "-experiments/worktrees/.claude/worktrees/agent-ab1e6e14",
        "-experiments/worktrees",
    ]
    assert rows[1]["previous_cwd"] == "-experiments/worktrees"


def test_corpus_sidecar_worktree_paths_are_linked_worktree_states(corpus):
    rows = _rows(corpus["workspace_states"], source="sidecar.worktreePath")
    got = {r["session_key"]: r["worktree_path"] for r in rows}
    assert got == {
        f"{WORKTREES_SID}/a4ca7529859c158c2": "-experiments/worktrees/.claude/worktrees/agent-a4ca7529",
        f"{WORKTREES_SID}/a52886dc180afb356": "-experiments/worktrees/.claude/worktrees/agent-a52886dc",
        f"{WORKTREES_SID}/ab1e6e141221a29ab": "-experiments/worktrees/.claude/worktrees/agent-ab1e6e14",
    }
    assert {r["is_worktree_linked"] for r in rows} == {True}
    assert {r["record_id"] for r in rows} == {None}
    # no transcript position: the snapshot tail, ordered after every record of its stream
    for r in rows:
        seqs = corpus["records"].filter(pl.col("session_key") == r["session_key"]).get_column("seq")
        assert r["seq"] == seqs.max() + 1 == seqs.len() + 1, r["session_key"]
    # each of those agents' records ran in its worktree
    for key, path in got.items():
        first = _rows(corpus["workspace_states"], session_key=key, source="record.cwd")
        assert [r["cwd"] for r in first] == [path]


def test_corpus_every_stream_with_a_cwd_has_its_first_state(corpus):
    with_cwd = corpus["records"].filter(pl.col("cwd").is_not_null()).get_column("session_key").unique()
    firsts = corpus["workspace_states"].filter(
        (pl.col("source") == "record.cwd") & pl.col("previous_cwd").is_null())
    assert sorted(firsts.get_column("session_key")) == sorted(with_cwd)


def test_corpus_has_no_vcs_fact_or_cost_state(corpus):
    # nothing in 1.0.17 .. 2.1.114 writes gitOperation, pr-link, bashEditDiff or cost-state
    assert older(corpus["vcs_events"]).height == 0
    assert corpus["usage_summaries"].height == 0
    assert older(corpus["file_changes"]).filter(pl.col("source") != "tool_result").height == 0
