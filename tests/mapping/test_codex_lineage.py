"""Codex threads and their roots: a parent that spawns subagents (one of them spawning its own), and a
fork, in every table and view that rolls streams up to their root session; every expected value read
from the rollout lines with json.loads.

No real rollout of a subagent or a fork is in the fixtures (tests/fixtures/codex/README.md), so the
family below is authored around the real tiny 0.104 session (the parent), in the shape the reference
gives (codex-format.md §3, §10, §14.5): a child's first line is its own session_meta (its
source.subagent.thread_spawn names its parent thread); a forked child (spawn_agent with fork_context,
or a user's fork) then copies the parent's lines, the parent's session_meta first, before its own
turns, whose turn ids are UUIDv7 taken after the child was created; the parent's spawn_agent call is
answered with the child's agent_id.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl
import pytest

import batch
from conftest import FIXTURES, codex_responses, one, read_tables, rows, walk_roots

TINY = FIXTURES / "codex" / "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
# Codex's message to a child forked at its spawn call (codex-rs core/src/agent/control.rs)
FORKED_OUTPUT = ("You are the newly spawned agent. The prior conversation history was forked from your parent agent. "
                 "Treat the next user message as your new task, and use the forked history only as background context.")


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def uuid7(when: str, n: int) -> str:
    """A UUIDv7 taken at `when` (its first 48 bits are the time in milliseconds)."""
    ms = f"{int(at(when).timestamp() * 1000):012x}"
    return f"{ms[:8]}-{ms[8:]}-7000-8000-{n:012x}"


def line(ts: str, kind: str, payload: dict) -> dict:
    return {"timestamp": ts, "type": kind, "payload": payload}


PARENT = load(TINY)
P = PARENT[0]["payload"]["id"]
C1 = uuid7("2026-02-23T12:20:00.100Z", 1)  # a forked subagent of P, which spawns G
C2 = uuid7("2026-02-23T12:21:00.500Z", 2)  # a forked subagent of P
G = uuid7("2026-02-23T12:20:05.000Z", 3)  # a subagent of C1, not forked
F = uuid7("2026-02-23T12:30:00.000Z", 4)  # a user's fork of P: a main session of its own


def meta(thread: str, created: str, *, parent: str | None = None, depth: int = 1, forked: bool = False) -> dict:
    payload = {**PARENT[0]["payload"], "id": thread, "timestamp": created}
    if parent is not None:
        payload |= {"source": {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": depth,
                                                             "agent_nickname": "Scout"}}},
                    "thread_source": "subagent", "parent_thread_id": parent}
    if forked:
        payload["forked_from_id"] = parent or P
    return line(created, "session_meta", payload)


def spawn(ts: str, call: str, child: str, message: str, *, fork: bool) -> tuple[dict, dict]:
    """The parent's spawn_agent call and its output naming the child thread."""
    args = {"message": message, **({"fork_context": True} if fork else {})}
    return (
        line(ts, "response_item", {"type": "function_call", "name": "spawn_agent", "arguments": json.dumps(args),
                                   "call_id": call}),
        line(ts, "response_item", {"type": "function_call_output", "call_id": call,
                                   "output": json.dumps({"agent_id": child, "nickname": "Scout"})}),
    )


def turn(start: str, n: int, prompt: str, usage: dict[str, int], seed: dict[str, int] | None = None) -> list[dict]:
    """A thread's own turn: started, the prompt (item and event copy), its context, one response."""
    turn_id = uuid7(start, 100 + n)
    total = {k: v + (seed or {}).get(k, 0) for k, v in usage.items()}
    return [
        line(start, "event_msg", {"type": "task_started", "turn_id": turn_id, "model_context_window": 258400}),
        line(start, "response_item", {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": prompt}]}),
        line(start, "event_msg", {"type": "user_message", "message": prompt, "images": []}),
        line(start, "turn_context", {"turn_id": turn_id, "cwd": PARENT[0]["payload"]["cwd"], "model": "gpt-5.3-codex",
                                     "approval_policy": "on-request", "sandbox_policy": {"type": "read-only"}}),
        line(start, "event_msg", {"type": "token_count", "info": {"total_token_usage": total, "last_token_usage": usage,
                                                                  "model_context_window": 258400}}),
        line(start, "event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": "done"}),
    ]


def usage(input_: int, cached: int, output: int) -> dict[str, int]:
    return {"input_tokens": input_, "cached_input_tokens": cached, "output_tokens": output,
            "reasoning_output_tokens": 0, "total_tokens": input_ + output}


PARENT_TOTAL = [o for o in PARENT if o["payload"].get("type") == "token_count" and o["payload"]["info"]][-1][
    "payload"]["info"]["total_token_usage"]
SPAWN_C1 = spawn("2026-02-23T12:20:00.000Z", "call_spawn_c1", C1, "Find where the tests live", fork=True)
SPAWN_C2 = spawn("2026-02-23T12:21:00.000Z", "call_spawn_c2", C2, "Review the parser", fork=True)
SPAWN_G = spawn("2026-02-23T12:20:02.000Z", "call_spawn_g", G, "List the fixtures", fork=False)


def forked_copy(upto: list[dict], call: dict) -> list[dict]:
    """What a child forked at `call` holds of its parent: every line so far, the call answered by Codex."""
    return [*upto, call, line(call["timestamp"], "response_item", {
        "type": "function_call_output", "call_id": call["payload"]["call_id"], "output": FORKED_OUTPUT})]


# each file as (its copy of another thread's lines, its own lines)
FAMILY: dict[str, tuple[list[dict], list[dict]]] = {
    P: ([], [*PARENT, *SPAWN_C1, *SPAWN_C2]),
    C1: (forked_copy(PARENT, SPAWN_C1[0]), [
        *turn("2026-02-23T12:20:01.000Z", 1, "Find where the tests live", usage(2000, 500, 100), PARENT_TOTAL),
        *SPAWN_G,
    ]),
    G: ([], turn("2026-02-23T12:20:06.000Z", 2, "List the fixtures", usage(800, 0, 40))),
    C2: (forked_copy([*PARENT, *SPAWN_C1], SPAWN_C2[0]),
         turn("2026-02-23T12:21:01.000Z", 3, "Review the parser", usage(3000, 2000, 200), PARENT_TOTAL)),
    F: ([*PARENT, *SPAWN_C1, *SPAWN_C2],
        turn("2026-02-23T12:30:10.000Z", 4, "Try   the other\napproach instead", usage(5000, 4000, 300), PARENT_TOTAL)),
}
METAS = {
    C1: meta(C1, "2026-02-23T12:20:00.100Z", parent=P, forked=True),
    G: meta(G, "2026-02-23T12:20:05.000Z", parent=C1, depth=2),
    C2: meta(C2, "2026-02-23T12:21:00.500Z", parent=P, forked=True),
    F: meta(F, "2026-02-23T12:30:00.000Z", forked=True),
}


def write_family(folder: Path, keys: list[str]) -> dict[str, list[dict]]:
    """The rollout files of `keys` under folder/2026/02/23; each file's lines."""
    day = folder / "2026" / "02" / "23"
    day.mkdir(parents=True)
    files = {}
    for key in keys:
        copy, own = FAMILY[key]
        objects = [*([METAS[key]] if key in METAS else []), *copy, *own]
        created = objects[0]["payload"]["timestamp"]
        name = f"rollout-{created[:19].replace(':', '-')}-{key}.jsonl"
        (day / name).write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
        files[key] = objects
    return files


def parent_of(first: dict) -> str | None:
    """The parent thread a rollout's own (first) session_meta names (§3)."""
    p = first["payload"]
    spawn_ = (p.get("source") or {}).get("subagent") if isinstance(p.get("source"), dict) else None
    named = (spawn_ or {}).get("thread_spawn", {}).get("parent_thread_id") if isinstance(spawn_, dict) else None
    return named or p.get("parent_thread_id")


def expected_roots(files: dict[str, list[dict]]) -> dict[str, str]:
    """Each thread's root: its own session_meta's parent followed up, through threads absent or not."""
    return walk_roots({key: parent_of(objects[0]) for key, objects in files.items()})


def own_tokens(key: str) -> int:
    """The tokens of a thread's own responses (its copy of its parent's are the parent's)."""
    return sum(u["input_tokens"] + u["output_tokens"] for u in codex_responses(FAMILY[key][1]))


def view(out: Path, query: str) -> list[tuple]:
    with duckdb.connect(str(out / "asr.duckdb"), read_only=True) as con:
        return con.sql(query).fetchall()


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    src = tmp_path_factory.mktemp("codex-family") / "sessions"
    files = write_family(src, [P, C1, G, C2, F])
    out = src.parent / "out"
    batch.convert([src], out)
    return out, files


def test_each_thread_rolls_up_to_the_root_its_own_session_meta_names(family):
    out, files = family
    t = read_tables(out)
    roots = expected_roots(files)
    assert roots == {P: P, C1: P, G: P, C2: P, F: F}
    sessions = t["sessions"]
    assert dict(sessions.select("session_key", "root_session_key").iter_rows()) == roots
    for key, objects in files.items():
        s = one(sessions, session_key=key)
        assert s["parent_session_key"] == parent_of(objects[0])
        source = objects[0]["payload"]["source"]
        assert s["stream_kind"] == ("subagent" if isinstance(source, dict) and "subagent" in source else "main")
    spawned = rows(t["lineage"], relation="spawned_by").sort("session_key")
    assert spawned.select("session_key", "parent_session_key", "call_id").rows() == sorted([
        (C1, P, "call_spawn_c1"), (G, C1, "call_spawn_g"), (C2, P, "call_spawn_c2"),
    ])
    # each call is the parent's own, not a copy a forked child holds of it
    for child, call in ((C1, "call_spawn_c1"), (C2, "call_spawn_c2"), (G, "call_spawn_g")):
        edge = one(t["lineage"], session_key=child, relation="spawned_by")
        assert edge["call_record_id"] == one(t["tool_calls"], call_id=call, session_key=parent_of(files[child][0]))[
            "call_record_id"]
    forks = rows(t["lineage"], relation="forked_from").sort("session_key")
    assert forks.select("session_key", "parent_session_key").rows() == sorted(
        (key, o[0]["payload"]["forked_from_id"]) for key, o in files.items() if "forked_from_id" in o[0]["payload"])


def test_a_forks_copy_is_its_parents_and_its_own_turns_are_its_own(family):
    out, files = family
    t = read_tables(out)
    for key, (copy, own) in FAMILY.items():
        records = rows(t["records"], session_key=key)
        start = 2 if key in METAS else 1  # the first line after its own session_meta
        copied = records.filter(pl.col("source_line").is_between(start, start + len(copy) - 1))
        assert copied["copied_from_session_id"].unique().to_list() == ([P] if copy else [])
        assert records.filter(pl.col("source_line") >= start + len(copy))["copied_from_session_id"].is_null().all()
        # its own responses are its inferences; the copied ones stay its parent's
        assert rows(t["inferences"], session_key=key).height == len(codex_responses(own))


def test_every_view_rolls_subagents_up_to_their_root(family):
    out, files = family
    roots = expected_roots(files)
    costs = view(out, "select inference_id, session_key, root_session_key, is_subagent from inference_costs")
    assert costs and all(root == roots[key] and sub == (key != roots[key]) for _, key, root, sub in costs)
    tree = {root: [k for k in files if roots[k] == root and own_tokens(k)] for root in set(roots.values())}
    tokens = {root: sum(own_tokens(k) for k in keys) for root, keys in tree.items()}
    assert view(out, "select root_session_key, streams, total_tokens from usage_by_session order by 1") == sorted(
        (root, len(keys), tokens[root]) for root, keys in tree.items())
    assert sorted(view(out, "select root_session_key, total_tokens from costliest_sessions")) == sorted(tokens.items())
    subagent_tokens = {root: sum(own_tokens(k) for k in keys if k != root) for root, keys in tree.items()}
    assert view(out, "select root_session_key, subagent_streams, subagent_tokens, subagent_token_share "
                     "from subagent_share order by 1") == sorted(
        (root, len([k for k in keys if k != root]), subagent_tokens[root], subagent_tokens[root] / tokens[root])
        for root, keys in tree.items())
    assert view(out, "select project, sessions, total_tokens from usage_by_project") == [
        (PARENT[0]["payload"]["cwd"], len(tree), sum(tokens.values()))]
    assert view(out, "select session_key, root_session_key from session_stats order by 1") == sorted(roots.items())


def test_without_the_parents_file_no_thread_is_its_own_parent(tmp_path):
    # the forked children hold copies of their spawning calls: the parent is still the thread their own
    # session_meta names, never the child itself or a sibling whose copy holds the call
    src = tmp_path / "sessions"
    files = write_family(src, [C1, G, C2])
    batch.convert([src], tmp_path / "out")
    t = read_tables(tmp_path / "out")
    sessions = t["sessions"]
    assert dict(sessions.select("session_key", "parent_session_key").iter_rows()) == {
        key: parent_of(objects[0]) for key, objects in files.items()}
    assert set(sessions["root_session_key"]) == {P}
    assert rows(t["lineage"], session_key=C1, relation="spawned_by")["parent_session_key"].to_list() == [P]
    for table in ("sessions", "lineage"):
        assert t[table].filter(t[table]["parent_session_key"] == t[table]["session_key"]).height == 0


def test_no_real_codex_session_is_its_own_parent(tmp_path):
    src = tmp_path / "codex"
    shutil.copytree(FIXTURES / "codex", src, ignore=shutil.ignore_patterns("records", "paginated"))  # real files only
    batch.convert([src], tmp_path / "out")
    t = read_tables(tmp_path / "out")
    for table in ("sessions", "lineage"):
        assert t[table].filter(t[table]["parent_session_key"] == t[table]["session_key"]).height == 0
    # no real rollout names a parent thread: each is its own root
    assert (t["sessions"]["root_session_key"] == t["sessions"]["session_key"]).all()


def test_each_threads_first_prompt_is_its_own_not_its_copy_of_its_parents(family):
    out, files = family
    sessions = read_tables(out)["sessions"]
    for key, (copy, own) in FAMILY.items():
        # the typed prompt is the user message item its user_message event repeats (§6)
        event = next(i for i, o in enumerate(own) if o["type"] == "event_msg" and o["payload"]["type"] == "user_message")
        item = next(o for o in reversed(own[:event]) if o["payload"].get("role") == "user")
        text = " ".join(b["text"] for b in item["payload"]["content"])
        assert one(sessions, session_key=key)["first_prompt"] == " ".join(text.split()), key
        line_ = files[key].index(item) + 1
        assert one(sessions, session_key=key)["first_prompt_record_id"] == f"{key}:line:{line_}"
