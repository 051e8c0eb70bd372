"""Codex rollouts of the 0.149+ formats (tests/fixtures/codex/records, authored from the reference: no
real file exists): usage from token_usage_record lines, a fork that references its parent's rollout
(history_base), the two rollouts of a reverted thread, and the §9.6 rule where a file has no records.
Every expected value is read from the fixture lines with json.loads (reference codex-format.md §9,
§10, §14.3 to §14.5)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import batch
from conftest import FIXTURES, codex_responses, one, read_tables, rows

RECORDS = FIXTURES / "codex" / "records"
PAGINATED = RECORDS / "paginated"
P_FILE = next(PAGINATED.glob("rollout-*-01a0be42-*.jsonl"))
F_FILE = next(PAGINATED.glob("rollout-*-01a0be79-*.jsonl"))
R_FILE, X_FILE = sorted(PAGINATED.glob("rollout-*-01a0c331-*.jsonl"))  # the first rollout, then the revert's
LEGACY = next((RECORDS / "legacy").glob("*.jsonl"))
USAGE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def thread(path: Path) -> str:
    return load(path)[0]["payload"]["id"]


def shown(path: Path, folder: str = "sessions") -> str:
    return f"{folder}/{path.name}"


def records_usage(*paths: Path) -> dict[str, dict]:
    """Each distinct response_id of the files' token_usage_record lines with its usage, first seen
    first; never a compacted line's embedded copy (it is no line of that kind)."""
    found: dict[str, dict] = {}
    for path in paths:
        for obj in load(path):
            if obj["type"] == "token_usage_record":
                found.setdefault(obj["payload"]["response_id"], obj["payload"]["usage"])
    return found


def record_lines(path: Path) -> dict[str, int]:
    """response_id -> the 1-based line of its first record in the file."""
    out: dict[str, int] = {}
    for n, obj in enumerate(load(path), 1):
        if obj["type"] == "token_usage_record":
            out.setdefault(obj["payload"]["response_id"], n)
    return out


def convert(tmp: Path, files: dict[str, list[Path]], **kw) -> dict[str, pl.DataFrame]:
    """Copy each folder's files and convert them all in one run."""
    for folder, paths in files.items():
        (tmp / folder).mkdir(parents=True, exist_ok=True)
        for path in paths:
            shutil.copy2(path, tmp / folder / path.name)
    out = tmp / "out"
    batch.convert([tmp / folder for folder in files], out, **kw)
    return {**read_tables(out), "manifest": json.loads((out / "manifest.json").read_text())}


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, pl.DataFrame]:
    return convert(tmp_path_factory.mktemp("records"), {"sessions": [P_FILE, F_FILE, R_FILE, X_FILE]})


def test_each_response_id_is_one_inference_with_its_records_usage(tables):
    inf = tables["inferences"]
    for paths in ([P_FILE], [F_FILE], [R_FILE, X_FILE]):
        expected = records_usage(*paths)
        mine = rows(inf, session_key=thread(paths[0])).sort("inference_id")
        assert mine["inference_id"].to_list() == sorted(expected), paths[0].name
        for row in mine.iter_rows(named=True):
            u = expected[row["inference_id"]]
            write = u.get("cache_write_input_tokens")
            assert row["input_total_tokens"] == u["input_tokens"] and row["input_includes_cache"]
            assert row["cache_read_tokens"] == u["cached_input_tokens"] and row["cache_write_tokens"] == write
            assert row["input_uncached_tokens"] == u["input_tokens"] - u["cached_input_tokens"] - (write or 0)
            assert row["output_total_tokens"] == u["output_tokens"]
            assert row["output_reasoning_tokens"] == u["reasoning_output_tokens"]
            assert row["usage_source"] == "token_usage_record" and row["usage_complete"]
            assert row["observation_count"] == 1
    # the record the usage is read from, and the model of the turn_context before it
    objs = load(P_FILE)
    for response_id, line in record_lines(P_FILE).items():
        row = one(inf, inference_id=response_id)
        assert (row["usage_source_file"], row["usage_source_line"]) == (shown(P_FILE), line)
        rec = one(tables["records"], record_id=row["record_id"])
        assert rec["kind"] == "com.openai.codex/token_usage_record" and rec["inference_id"] == response_id
        assert json.loads(rec["native"]) == objs[line - 1]
        assert rec["model"] == row["model"] == [o for o in objs[:line] if o["type"] == "turn_context"][-1]["payload"]["model"]


def test_token_counts_beside_records_give_no_inference(tables):
    objs = load(P_FILE)
    counts = [n for n, o in enumerate(objs, 1) if o["type"] == "event_msg" and o["payload"]["type"] == "token_count"]
    lines = rows(tables["source_lines"], source_file=shown(P_FILE))
    # accounted for: records (the first of each pair) or repeats of one, never an inference
    got = lines.filter(pl.col("line").is_in(counts))
    assert got.height == len(counts) and set(got["status"]) <= {"mapped", "duplicate"}
    recs = tables["records"].filter(pl.col("record_id").is_in(got["record_id"].implode()))
    assert set(recs["kind"]) == {"com.openai.codex/token_count"} and recs["inference_id"].null_count() == recs.height
    # the §9.6 rule would have counted these pairs; the records count each response once instead
    assert len(codex_responses(objs)) > 0
    assert rows(tables["inferences"], session_key=thread(P_FILE), usage_source="token_count").height == 0
    # one observation per record line: the compacted line's embedded copy is none
    copies = [o for o in objs if o["type"] == "compacted" and "latest_token_usage_record" in o["payload"]]
    assert copies and all(c["payload"]["latest_token_usage_record"]["response_id"] in records_usage(P_FILE) for c in copies)
    observed = rows(tables["inference_observations"], session_key=thread(P_FILE))
    assert observed.height == sum(o["type"] == "token_usage_record" for o in objs)
    compacted = [n for n, o in enumerate(objs, 1) if o["type"] == "compacted"]
    assert one(tables["records"], record_id=f"{thread(P_FILE)}:line:{compacted[0]}")["inference_id"] is None


def test_an_incomplete_response_with_usage_is_counted(tables):
    # resp_p3 ended with turn_aborted and wrote no token_count: only its record says it was spent
    objs = load(P_FILE)
    tc_lasts = [o["payload"]["info"]["last_token_usage"] for o in objs
                if o["type"] == "event_msg" and o["payload"]["type"] == "token_count" and o["payload"]["info"]]
    incomplete = {r: u for r, u in records_usage(P_FILE).items() if u not in tc_lasts}
    assert list(incomplete) == ["resp_p3"]
    assert any(o["payload"].get("type") == "turn_aborted" for o in objs if o["type"] == "event_msg")
    assert one(tables["inferences"], inference_id="resp_p3")["output_total_tokens"] == incomplete["resp_p3"]["output_tokens"]


def test_a_child_repeating_its_parents_record_counts_it_once(tmp_path):
    """A child file that holds a copy of its parent's record (a legacy fork, or a subagent's inherited
    context) and the same record in two files: one inference each, the parent's observation selected."""
    parent = load(P_FILE)
    child_id = "01a0be90-0000-7000-8000-00000000c41d"
    copied = next(o for o in parent if o["type"] == "token_usage_record")
    own = {**copied, "payload": {**copied["payload"], "thread_id": child_id, "response_id": "resp_c1"}}
    meta = {**parent[0], "payload": {**parent[0]["payload"], "id": child_id, "session_id": child_id,
                                     "source": {"subagent": {"thread_spawn": {"parent_thread_id": thread(P_FILE),
                                                                              "depth": 1}}},
                                     "thread_source": "subagent", "parent_thread_id": thread(P_FILE)}}
    child = tmp_path / "written" / f"rollout-2026-09-20T12-30-00-{child_id}.jsonl"
    child.parent.mkdir()
    child.write_text("".join(json.dumps(o) + "\n" for o in (meta, copied, own)), encoding="utf-8")
    # the parent twice (sessions/ and archived_sessions/), the child once
    t = convert(tmp_path, {"sessions": [P_FILE], "archived_sessions": [P_FILE], "child": [child]})
    expected = records_usage(P_FILE, child)
    inf = t["inferences"]
    assert sorted(inf["inference_id"]) == sorted(expected)
    assert inf["input_total_tokens"].sum() == sum(u["input_tokens"] for u in expected.values())
    assert inf["output_total_tokens"].sum() == sum(u["output_tokens"] for u in expected.values())
    shared = one(inf, inference_id=copied["payload"]["response_id"])
    assert shared["session_key"] == thread(P_FILE) and shared["observation_count"] == 2
    assert one(inf, inference_id="resp_c1")["session_key"] == child_id
    # one copy of the parent's file holds the records, every line of the other is a duplicate of one
    reasons = [set(rows(t["source_lines"], source_file=shown(P_FILE, folder))["reason"])
               for folder in ("archived_sessions", "sessions")]
    assert sorted(r == {"stream_copy"} for r in reasons) == [False, True]


def test_a_fork_by_history_base_holds_nothing_of_its_parent(tables, tmp_path):
    fork, parent = load(F_FILE), load(P_FILE)
    meta = fork[0]["payload"]
    base = meta["history_base"]
    assert base["thread_id"] == meta["forked_from_id"] == thread(P_FILE)
    # the fixture's cut: end_byte_offset is where the parent's line of that ordinal starts
    raw = P_FILE.read_bytes().split(b"\n")
    starts = {json.loads(line)["ordinal"]: sum(len(x) + 1 for x in raw[:i]) for i, line in enumerate(raw) if line}
    assert starts[base["end_ordinal_exclusive"]] == base["end_byte_offset"]
    assert fork[0]["ordinal"] == base["end_ordinal_exclusive"]  # no copy: its ordinals go on from the cut
    f = thread(F_FILE)
    # every line of the fork is its own: a record, or a copy of one of its own records (a response
    # item beside its item_completed item), none copied from the parent
    recs = rows(tables["records"], session_key=f)
    lines = rows(tables["source_lines"], source_file=next(iter(set(recs["source_file"]))))
    assert lines.height == len(fork) and set(lines.filter(pl.col("status") != "mapped")["record_id"]) <= set(recs["record_id"])
    assert recs["copied_from_session_id"].null_count() == recs.height
    assert sorted(rows(tables["inferences"], session_key=f)["inference_id"]) == sorted(records_usage(F_FILE))
    lineage = rows(tables["lineage"], session_key=f).sort("relation")
    assert lineage.select("relation", "parent_session_key", "evidence", "evidence_detail",
                          "parent_ordinal_exclusive").rows() == [
        ("forked_from", thread(P_FILE), "native_field", "session_meta.forked_from_id",
         meta["forked_from_ordinal_exclusive"]),
        ("inherits", thread(P_FILE), "native_field", "session_meta.history_base", base["end_ordinal_exclusive"]),
    ]
    s = one(tables["sessions"], session_key=f)
    assert (s["inherits_mode"], s["inherits_session_id"], s["forked_from_session_id"]) == (
        "referenced", thread(P_FILE), thread(P_FILE))
    assert json.loads(s["meta"])["com.openai.codex/session_meta"]["history_base"] == base
    assert s["root_session_key"] == f  # a fork is a root of its own
    assert rows(tables["losses"], session_key=f, category="lineage").height == 0
    # the parent's rows are the same with the fork or without it
    alone = convert(tmp_path, {"sessions": [P_FILE]})
    for name in ("inferences", "records"):
        assert rows(alone[name], session_key=thread(P_FILE)).sort(pl.all()).equals(
            rows(tables[name], session_key=thread(P_FILE)).sort(pl.all())), name
    assert len(parent) == rows(tables["source_lines"], session_key=thread(P_FILE)).height


def test_the_rollouts_of_a_reverted_thread_are_one_session(tables):
    first, nxt = load(R_FILE), load(X_FILE)
    r = thread(R_FILE)
    assert thread(X_FILE) == r and nxt[0]["payload"]["history_base"]["thread_id"] == r
    cut = nxt[0]["payload"]["history_base"]["end_ordinal_exclusive"]
    s = one(tables["sessions"], session_key=r)
    assert s["source_files"] == sorted([shown(R_FILE), shown(X_FILE)])
    assert s["line_count"] == len(first) + len(nxt)
    assert json.loads(s["meta"])["com.openai.codex/session_meta"] == {
        k: v for k, v in first[0]["payload"].items() if k != "base_instructions"}
    lines = rows(tables["source_lines"], session_key=r)
    assert lines.height == len(first) + len(nxt) and "stream_copy" not in set(lines["reason"].drop_nulls())
    recs = rows(tables["records"], session_key=r).sort("seq")
    assert recs["seq"].to_list() == list(range(1, recs.height + 1))
    # the first rollout's lines, then the next one's, each by position
    assert recs["source_file"].to_list() == sorted(recs["source_file"].to_list(), key=lambda n: n != shown(R_FILE))
    assert recs["record_id"].n_unique() == recs.height
    mapped = lines.filter(pl.col("status") == "mapped")
    x_rollout = X_FILE.name.removesuffix(".jsonl").rpartition("_")[2]
    for row in mapped.iter_rows(named=True):
        objs = first if row["source_file"] == shown(R_FILE) else nxt
        rec = one(recs, record_id=row["record_id"])
        assert json.loads(rec["native"]) == objs[row["line"] - 1]
        assert rec["position"] == (f"line:{row['line']}" if objs is first else f"rollout:{x_rollout}:line:{row['line']}")
        # the first rollout's lines from the cut on are the reverted branch
        reverted = objs is first and objs[row["line"] - 1]["ordinal"] >= cut
        assert rec["status"] == ("reverted" if reverted else None), row
    # the next rollout continues from the first rollout's last record before the cut
    before = mapped.filter((pl.col("source_file") == shown(R_FILE))
                           & (pl.col("line") <= max(n for n, o in enumerate(first, 1) if o["ordinal"] < cut)))
    head = recs.filter(pl.col("source_file") == shown(X_FILE)).row(0, named=True)
    assert head["logical_parent_record_id"] == before.sort("line")["record_id"][-1]
    assert recs.filter(pl.col("logical_parent_record_id").is_not_null()).height == 1
    # usage of both rollouts: the reverted response was spent, the next rollout repeats none
    expected = records_usage(R_FILE, X_FILE)
    inf = rows(tables["inferences"], session_key=r)
    assert sorted(inf["inference_id"]) == sorted(expected)
    assert inf["input_total_tokens"].sum() == sum(u["input_tokens"] for u in expected.values())
    assert inf["output_total_tokens"].sum() == sum(u["output_tokens"] for u in expected.values())
    assert rows(tables["lineage"], session_key=r).height == 0


def test_a_reverted_thread_is_the_same_whatever_the_batches_and_the_order(tables, tmp_path):
    t = convert(tmp_path, {"b": [X_FILE], "a": [R_FILE]}, batch_bytes=1)
    r = thread(R_FILE)
    for name in ("records", "inferences"):
        got = rows(t[name], session_key=r).drop("source_file", "usage_source_file", strict=False)
        want = rows(tables[name], session_key=r).drop("source_file", "usage_source_file", strict=False)
        assert got.sort("record_id").equals(want.sort("record_id")), name


def test_the_part_of_a_file_before_its_records_is_counted_by_pairs(tmp_path):
    """A legacy rollout resumed by a Codex that writes records: its earlier token_counts by the §9.6
    rule, its responses from the resumed turn on by their records, none twice."""
    legacy = load(LEGACY)
    last = [o for o in legacy if o["type"] == "event_msg" and o["payload"]["type"] == "token_count"][-1]["payload"]
    total = last["info"]["total_token_usage"]
    turn = "019de7d0-0000-7000-8000-0000000000aa"
    u1 = {"input_tokens": 8400, "cached_input_tokens": 8064, "output_tokens": 95, "reasoning_output_tokens": 0,
          "total_tokens": 8495, "cache_write_input_tokens": 0}
    u2 = {"input_tokens": 8600, "cached_input_tokens": 8448, "output_tokens": 60, "reasoning_output_tokens": 0,
          "total_tokens": 8660, "cache_write_input_tokens": 0}

    def tc(tot, lst):
        return {"timestamp": "2026-09-01T08:00:00.000Z", "type": "event_msg",
                "payload": {"type": "token_count", "info": {"total_token_usage": tot, "last_token_usage": lst}}}

    def rec(resp, u):
        return {"timestamp": "2026-09-01T08:00:00.000Z", "type": "token_usage_record",
                "payload": {"thread_id": thread(LEGACY), "turn_id": turn, "response_id": resp, "usage": u,
                            "turn_token_usage": u, "thread_token_usage": u}}

    plus = lambda a, b: {k: a[k] + b.get(k, 0) for k in a}  # noqa: E731
    resumed = [
        {"timestamp": "2026-09-01T08:00:00.000Z", "type": "turn_context", "payload": {"turn_id": turn, "model": "gpt-5.5"}},
        {"timestamp": "2026-09-01T08:00:00.000Z", "type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}},
        tc(total, last["info"]["last_token_usage"]),  # the request start re-emits the last info
        tc(plus(total, u1), u1), rec("resp_l1", u1),  # a token_count before its record
        rec("resp_l2", u2), tc(plus(plus(total, u1), u2), u2),
    ]
    path = tmp_path / "sessions" / LEGACY.name
    path.parent.mkdir()
    path.write_text(LEGACY.read_text(encoding="utf-8") + "".join(json.dumps(o) + "\n" for o in resumed), encoding="utf-8")
    batch.convert([path.parent], tmp_path / "out")
    inf = read_tables(tmp_path / "out")["inferences"]
    pairs = codex_responses(legacy)
    assert rows(inf, usage_source="token_count").height == len(pairs)
    assert sorted(rows(inf, usage_source="token_usage_record")["inference_id"]) == ["resp_l1", "resp_l2"]
    assert inf["input_total_tokens"].sum() == sum(u["input_tokens"] for u in [*pairs, u1, u2])
    assert inf["output_total_tokens"].sum() == sum(u["output_tokens"] for u in [*pairs, u1, u2])


def test_rollouts_without_records_keep_their_figures(tmp_path):
    """The real rollouts and the authored legacy one: every inference as the converter wrote it before
    it read token_usage_record lines (records/legacy-inferences.csv), and the §9.6 rule."""
    real = sorted((FIXTURES / "codex").glob("rollout-*.jsonl"))
    t = convert(tmp_path, {"codex": [*real, LEGACY]})
    with (RECORDS / "legacy-inferences.csv").open(newline="", encoding="utf-8") as fh:
        before = list(csv.DictReader(fh))
    columns = list(before[0])
    now = t["inferences"].select(columns).sort("session_key", "usage_source_line")
    assert now.height == len(before)
    for got, want in zip(now.iter_rows(named=True), before):
        assert {k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for k, v in got.items()} == want
    for path in [*real, LEGACY]:
        expected = codex_responses(load(path))
        mine = rows(t["inferences"], session_key=thread(path))
        assert mine.height == len(expected)
        assert mine["input_total_tokens"].sum() == sum(r["input_tokens"] for r in expected)
        assert mine["output_total_tokens"].sum() == sum(r["output_tokens"] for r in expected)
