"""The views of sql/views/ on an authored output, every expected row computed by hand.

The fixture is a small output folder written table by table (only the columns the views read),
with its own price list, so that each figure below can be checked with pencil and paper:

- S1 (main, /p/alpha) with subagent S1/agentA (its own cwd /p/alpha/wt: the project stays the
  main session's); S2 (main, /p/beta); S9/agentB, a subagent whose main session is not in the
  output (/p/gamma). S2 is a Codex stream, the others Claude Code's: the views grouped by model
  group by (agent, model).
- Prices per million tokens (input, output, 5m write, 1h write, cache read): alpha-model 1, 10,
  2, 4, 0.1 from 2026-01-01 and 2, 20, 4, 8, 0.2 from 2026-03-02; beta-model 3, 30, 5, 6, 0.3;
  late-model only from 2026-04-01; gamma-model has no price.
- Six inferences: i1 (S1, alpha, day 1), i2 (S1/agentA, beta, incomplete), i3 (S2, alpha, day 2,
  new price), i4 (S2, gamma: unpriced), i5 (S9/agentB, alpha, cache counts not reported, 23:30
  UTC), i6 (S2, late-model before its first price).

On the real corpus, every view is compared whole with the same figures recomputed from the base
tables and genai-prices' list prices (written out below, LIST_PRICES) with Polars and plain Python,
not with the views' SQL. The real Codex
rollouts of tests/fixtures/codex, converted with Claude Code transcripts, show both agents apart in
the views grouped by (agent, model).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import date, datetime, timezone
from itertools import groupby
from pathlib import Path

import duckdb
import polars as pl
import polars.selectors as cs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from batch.output.catalog import view_files, write_catalog
from batch.output.prices import read_prices
from batch.schema import TABLES
import batch
from conftest import CORPUS, ROOT, SID, TEXT, assistant, read_tables, uid, user, walk_roots, write_jsonl

S1, A1, S2, B9 = "S1", "S1/agentA", "S2", "S9/agentB"
CC, CODEX = "claude-code", "codex"
PRICING = """model,effective_date,input_usd_per_mtok,output_usd_per_mtok,cache_write_5m_usd_per_mtok,cache_write_1h_usd_per_mtok,cache_read_usd_per_mtok,source,checked_on
alpha-model,2026-01-01,1,10,2,4,0.1,authored,2026-11-30
alpha-model,2026-03-02,2,20,4,8,0.2,authored,2026-11-30
beta-model,2026-01-01,3,30,5,6,0.3,authored,2026-11-30
late-model,2026-04-01,1,1,1,1,1,authored,2026-11-30
"""


def ts(day: int, hour: int, minute: int) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=timezone.utc)


def inference(iid, session, model, at, uncached, read, write, w1h, output, *, complete=True, source="transcript"):
    total = None if None in (uncached, read, write) else uncached + read + write
    return dict(
        inference=dict(
            inference_id=iid, session_key=session, record_id=f"{session}:{iid}", model=model,
            input_uncached_tokens=uncached, cache_read_tokens=read, cache_write_tokens=write,
            cache_write_1h_tokens=w1h, output_total_tokens=output, input_total_tokens=total,
            usage_complete=complete, usage_source=source,
        ),
        record=dict(record_id=f"{session}:{iid}", session_key=session, kind="message", native_type="assistant",
                    author="model", timestamp=at, inference_id=iid, model=model),
    )


INFERENCES = [
    inference("i1", S1, "alpha-model", ts(1, 10, 1), 10, 1000, 200, 50, 100),
    inference("i2", A1, "beta-model", ts(1, 10, 6), 20, 0, 400, None, 50, complete=False),
    inference("i3", S2, "alpha-model", ts(2, 9, 1), 5, 500, 0, 0, 10),
    inference("i4", S2, "gamma-model", ts(2, 9, 2), 1, 2, 3, None, 4),
    inference("i5", B9, "alpha-model", ts(2, 23, 30), 0, None, None, None, 7, source="agent_progress"),
    inference("i6", S2, "late-model", ts(2, 9, 3), 100, 0, 0, 0, 0),
]


def prompt(n, session, *, author=None, origin=None, is_meta=None, kind="message", native_type="user"):
    return dict(record_id=f"{session}:p{n}", session_key=session, seq=n, kind=kind, native_type=native_type,
                author=author, origin=origin, is_meta=is_meta)


def call(cid, session, name, kind, status, permission=None, decided_by=None, evidence=None):
    return dict(call_id=cid, session_key=session, tool_name=name, tool_kind=kind, status=status,
                permission=permission, permission_decided_by=decided_by, permission_evidence=evidence)


def hook(n, key, event, command, status, timed_out=None):
    return dict(record_id=f"{S1}:h{n}", session_key=S1, execution_key=key, event=event, command=command,
                status=status, is_timed_out=timed_out)


def compaction(n, session, kind, trigger=None, pre=None):
    return dict(record_id=f"{session}:c{n}", session_key=session, compaction_kind=kind, trigger=trigger,
                pre_tokens=pre, recorded_at=ts(1, 10, 20))


TABLE_ROWS = {
    "sessions": [
        dict(session_key=S1, agent=CC, stream_kind="main", root_session_key=S1, cwd="/p/alpha", title="Alpha",
             started_at=ts(1, 10, 0), ended_at=ts(1, 10, 30), record_count=10),
        dict(session_key=A1, agent=CC, stream_kind="subagent", parent_session_key=S1, root_session_key=S1,
             cwd="/p/alpha/wt", started_at=ts(1, 10, 5), ended_at=ts(1, 10, 10), record_count=4),
        dict(session_key=S2, agent=CODEX, stream_kind="main", root_session_key=S2, cwd="/p/beta",
             started_at=ts(2, 9, 0), ended_at=ts(2, 9, 6), record_count=3),
        # its parent S9 is not in the output: still its root
        dict(session_key=B9, agent=CC, stream_kind="subagent", parent_session_key="S9", root_session_key="S9",
             cwd="/p/gamma", record_count=2),
    ],
    "inferences": [i["inference"] for i in INFERENCES],
    "records": [i["record"] for i in INFERENCES] + [
        prompt(1, S1, author="human", origin="prompt"),
        prompt(2, S1),  # no marker: a prompt whose author the transcript does not say
        prompt(3, S1, author="harness", origin="injected", is_meta=True),
        prompt(4, S1, author="harness", origin="injected"),
        prompt(5, S1, origin="command"),  # a local command: the next user message is not its expansion
        prompt(6, S1, author="tool", origin="tool", kind="tool_result"),
        prompt(7, S1, author="hook", origin="injected"),
        prompt(8, A1, author="agent", origin="prompt"),
        prompt(9, S1, origin="command"),  # /init: expanded into the meta prompt that follows
        prompt(10, S1, author="harness", origin="injected", is_meta=True),
    ],
    "tool_calls": [
        call("c1", S1, "Bash", "execute", "completed"),
        call("c2", S1, "Bash", "execute", "error"),
        call("c3", S1, "Read", "read", "completed"),
        call("c4", S2, "Edit", "edit", "denied", "reject_once", "user", "native_field"),
        call("c5", S2, "Edit", "edit", "completed", "allow_once", "user", "native_field"),
        call("c6", S2, "Write", "edit", "interrupted", evidence="native_field"),
        call("c7", S2, "Bash", "execute", "pending"),
        call("c8", S1, "Bash", "execute", "completed", "allow_once", "policy", "native_field"),
        call("c9", S1, "mcp__x__y", "other", "cancelled", "reject_once", "hook", "native_field"),
        # a person's rejection, and the cancellation of the turn's other call, read from the results' texts
        call("c10", S1, "ExitPlanMode", "other", "denied", "reject_once", "user", "text_marker"),
        call("c11", S1, "Bash", "execute", "cancelled", "reject_once", "user", "text_marker"),
    ],
    "hooks": [
        hook(1, "k1", "pre_tool_use", "lint", "started"),
        hook(2, "k1", "pre_tool_use", "lint", "non_blocking_error"),
        hook(3, "k2", "pre_tool_use", "lint", "success"),
        hook(4, "k3", "pre_tool_use", "lint", "blocked"),
        hook(5, "k4", "stop", "notify", "summarized"),
        hook(6, "k5", "stop", "notify", "cancelled", True),
        hook(7, "k6", "stop", "notify", "success"),
    ],
    "compactions": [
        compaction(1, S1, "full", "auto", 150000),
        compaction(2, S1, "micro"),
        compaction(3, S1, "prune"),
        compaction(4, S2, "full", "manual", 90000),
        compaction(5, S2, "full", "auto", 120000),
    ],
}


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The authored output folder, with its catalog."""
    out = tmp_path_factory.mktemp("views") / "out"
    for table in TABLES:
        folder = out / table.name
        folder.mkdir(parents=True)
        rows = TABLE_ROWS.get(table.name, [])
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), folder / "part-00000.parquet")
    (out / "manifest.json").write_text(json.dumps({"format": {"name": "asr", "version": "0.1"}}))
    pricing = out.parent / "pricing.csv"
    pricing.write_text(PRICING)
    write_catalog(out, out, overrides=read_prices(pricing))
    return out


@pytest.fixture
def con(authored: Path):
    # A time zone far from UTC: days must still be UTC days.
    with duckdb.connect(str(authored / "asr.duckdb"), read_only=True) as con:
        con.execute("set TimeZone = 'Pacific/Kiritimati'")
        yield con


def rows(con, query: str) -> list[tuple]:
    """Fetch rows with floats rounded to 9 places, so hand-computed figures compare exactly."""
    def norm(v):
        return round(v, 9) if isinstance(v, float) else v
    return [tuple(norm(v) for v in row) for row in con.sql(query).fetchall()]


def r(x: float) -> float:
    return round(x, 9)


D1, D2 = date(2026, 3, 1), date(2026, 3, 2)


def test_every_view_file_starts_with_its_grain_and_reads():
    for name, text in view_files().items():
        first = text.splitlines()[0]
        assert first.startswith(f"-- {name}: one row per "), first
        assert "-- reads: " in text


def test_every_view_is_in_the_catalog(con):
    views = {row[0] for row in con.sql("select view_name from duckdb_views() where not internal").fetchall()}
    tables = {row[0] for row in con.sql("select table_name from duckdb_tables() where not internal").fetchall()}
    # inference_costs and hook_failures are stored as tables (`-- materialized: table`)
    assert tables == {"model_prices", "inference_costs", "hook_failures"}
    names = views | tables
    assert len(view_files()) >= 10
    assert {t.name for t in TABLES} <= names


def test_inference_costs_prices_each_response_at_the_price_of_its_day(con):
    assert rows(con, """
        select inference_id, root_session_key, is_subagent, project, agent, day, price_effective_date,
               cost_usd, is_priced, is_cost_lower_bound, total_tokens
        from inference_costs order by inference_id
    """) == [
        # 10x1 + 100x10 + 1000x0.1 + 50x4 (1h) + 150x2 (5m: 200 - 50) = 1610
        ("i1", S1, False, "/p/alpha", CC, D1, date(2026, 1, 1), r(1610e-6), True, False, 1310),
        # 20x3 + 50x30 + 400x5 = 3560; the output is a placeholder: a lower bound
        ("i2", S1, True, "/p/alpha", CC, D1, date(2026, 1, 1), r(3560e-6), True, True, 470),
        # the new price of 2026-03-02: 5x2 + 10x20 + 500x0.2 = 310
        ("i3", S2, False, "/p/beta", CODEX, D2, D2, r(310e-6), True, False, 515),
        ("i4", S2, False, "/p/beta", CODEX, D2, None, None, False, False, 10),
        # 23:30 UTC is still 2026-03-02; cache counts not reported: 7x20 = 140, a lower bound
        ("i5", "S9", True, "/p/gamma", CC, D2, D2, r(140e-6), True, True, None),
        ("i6", S2, False, "/p/beta", CODEX, D2, None, None, False, False, 100),
    ]


def test_usage_by_day(con):
    assert rows(con, "select * from usage_by_day") == [
        (D1, CC, "alpha-model", 1, 10, 1000, 200, 100, 1310, r(1610e-6), 0, 0, False),
        (D1, CC, "beta-model", 1, 20, 0, 400, 50, 470, r(3560e-6), 0, 1, True),
        # alpha-model on day 2 is two rows: i5 of a Claude Code stream, i3 of the Codex stream S2
        (D2, CC, "alpha-model", 1, 0, None, None, 7, None, r(140e-6), 0, 0, True),
        (D2, CODEX, "alpha-model", 1, 5, 500, 0, 10, 515, r(310e-6), 0, 0, False),
        (D2, CODEX, "gamma-model", 1, 1, 2, 3, 4, 10, None, 1, 0, False),
        (D2, CODEX, "late-model", 1, 100, 0, 0, 0, 100, None, 1, 0, False),
    ]


def test_usage_by_project_names_unpriced_models(con):
    assert rows(con, "select * from usage_by_project") == [
        ("/p/alpha", 1, 2, 30, 1000, 600, 150, 1780, r(5170e-6), 0, [], 1, True),
        ("/p/beta", 1, 3, 106, 502, 3, 14, 625, r(310e-6), 2, ["gamma-model", "late-model"], 0, False),
        ("/p/gamma", 1, 1, 0, None, None, 7, None, r(140e-6), 0, [], 0, True),
    ]


def test_usage_by_session_includes_subagents(con):
    got = rows(con, """
        select root_session_key, project, title, models, streams, inferences, total_tokens, cost_usd,
               unpriced_inferences, unpriced_models, incomplete_inferences, is_lower_bound,
               first_response_at, last_response_at
        from usage_by_session
    """)
    assert got == [
        (S1, "/p/alpha", "Alpha", ["alpha-model", "beta-model"], 2, 2, 1780, r(5170e-6), 0, [], 1, True,
         ts(1, 10, 1), ts(1, 10, 6)),
        (S2, "/p/beta", None, ["alpha-model", "gamma-model", "late-model"], 1, 3, 625, r(310e-6), 2,
         ["gamma-model", "late-model"], 0, False, ts(2, 9, 1), ts(2, 9, 3)),
        ("S9", "/p/gamma", None, ["alpha-model"], 1, 1, None, r(140e-6), 0, [], 0, True, ts(2, 23, 30),
         ts(2, 23, 30)),
    ]


def test_costliest_sessions_ranks_by_cost(con):
    total = 5170 + 310 + 140
    assert rows(con, "select cost_rank, root_session_key, cost_usd, share_of_cost from costliest_sessions") == [
        (1, S1, r(5170e-6), r(5170 / total)),
        (2, S2, r(310e-6), r(310 / total)),
        (3, "S9", r(140e-6), r(140 / total)),
    ]


def test_cache_hit_ratio_counts_only_inferences_reporting_every_input(con):
    assert rows(con, """
        select day, agent, model, inferences, input_total_tokens, cache_read_tokens, cache_hit_ratio
        from cache_hit_ratio
    """) == [
        (D1, CC, "alpha-model", 1, 1210, 1000, r(1000 / 1210)),
        (D1, CC, "beta-model", 1, 420, 0, 0.0),
        (D2, CODEX, "alpha-model", 1, 505, 500, r(500 / 505)),  # i5 (Claude Code) reports no cache counts
        (D2, CODEX, "gamma-model", 1, 6, 2, r(2 / 6)),
        (D2, CODEX, "late-model", 1, 100, 0, 0.0),
    ]


def test_subagent_share(con):
    assert rows(con, "select * from subagent_share") == [
        (S1, "/p/alpha", 1, 2, 1, 1780, 470, r(470 / 1780), r(5170e-6), r(3560e-6), r(3560 / 5170)),
        (S2, "/p/beta", 0, 3, 0, 625, 0, 0.0, r(310e-6), 0.0, 0.0),
        # its only inference does not report its input: tokens unknown, cost all the subagent's
        ("S9", "/p/gamma", 1, 1, 1, None, None, None, r(140e-6), r(140e-6), 1.0),
    ]


def test_tool_rates_by_kind(con):
    assert rows(con, "select * from tool_rates") == [
        # denials and cancellations are counted apart from errors, whatever recorded them
        ("execute", 1, 5, 1, 2, 1, 0, 1, 0.25, 0.0, 0.25),
        ("edit", 2, 3, 0, 1, 0, 1, 1, 0.0, r(1 / 3), r(1 / 3)),
        ("other", 2, 2, 0, 0, 0, 1, 1, 0.0, 0.5, 0.5),
        ("read", 1, 1, 0, 1, 0, 0, 0, 0.0, 0.0, 0.0),
    ]


def test_approvals_by_decider(con):
    assert rows(con, "select * from approvals") == [
        ("user", "reject_once", "text_marker", 2, 2, 1, r(2 / 6)),  # c10 denied, c11 cancelled
        ("hook", "reject_once", "native_field", 1, 1, 0, r(1 / 6)),
        ("policy", "allow_once", "native_field", 1, 1, 0, r(1 / 6)),
        ("user", "allow_once", "native_field", 1, 1, 0, r(1 / 6)),
        ("user", "reject_once", "native_field", 1, 1, 1, r(1 / 6)),
    ]


def test_hook_failures_count_executions_not_reports(con):
    assert rows(con, "select * from hook_failures") == [
        # k1 started then failed: one failed execution; k3 blocked on purpose
        ("pre_tool_use", "lint", 3, 1, 1, 1, 0, 0, r(1 / 3)),
        # k4 only summarized: unknown outcome, left out of the rate; k5 timed out
        ("stop", "notify", 3, 1, 0, 1, 1, 1, 0.5),
    ]


def test_compactions_per_session_lists_every_stream(con):
    assert rows(con, "select * exclude (first_compaction_at) from compactions_per_session") == [
        (S1, "main", 1, 1, 1, 3, 1, 150000),
        (S2, "main", 2, 0, 0, 2, 1, 120000),
        (A1, "subagent", 0, 0, 0, 0, 0, None),
        (B9, "subagent", 0, 0, 0, 0, 0, None),
    ]


def test_session_stats(con):
    assert rows(con, """
        select session_key, root_session_key, duration_minutes, records, turns, inferences, tool_calls
        from session_stats
    """) == [
        (S1, S1, 30.0, 10, 3, 1, 7),  # a human prompt, an unmarked one and an expanded command
        (A1, S1, 5.0, 4, 1, 1, 0),  # the agent's prompt
        (S2, S2, 6.0, 3, 0, 3, 4),
        (B9, "S9", None, 2, 0, 1, 0),
    ]


def test_usage_completeness_shows_the_lower_bound_share(con):
    assert rows(con, "select * from usage_completeness") == [
        (CC, "alpha-model", 2, 0, 0.0, 1, 107, 0, 0.0, r(1750e-6), 0.0, 0.0),  # i1 and i5
        (CC, "beta-model", 1, 1, 1.0, 0, 50, 50, 1.0, r(3560e-6), r(3560e-6), 1.0),
        (CODEX, "alpha-model", 1, 0, 0.0, 0, 10, 0, 0.0, r(310e-6), 0.0, 0.0),  # i3
        # unpriced: no cost, so no known lower bound either
        (CODEX, "gamma-model", 1, 0, 0.0, 0, 4, 0, 0.0, None, None, None),
        (CODEX, "late-model", 1, 0, 0.0, 0, 0, 0, None, None, None, None),
    ]


def test_unpriced_models_are_named_with_their_first_price(con):
    assert rows(con, "select * from unpriced_models") == [
        (CODEX, "gamma-model", 1, 10, 4, D2, D2, None),
        (CODEX, "late-model", 1, 100, 0, D2, D2, date(2026, 4, 1)),
    ]


def test_views_run_on_the_real_corpus(corpus_out: Path):
    with duckdb.connect(str(corpus_out / "asr.duckdb"), read_only=True) as con:
        for name in view_files():
            con.sql(f"select * from {name}").fetchall()
        # the cost view keeps every inference and every token of the table it prices
        assert con.sql("select count(*), sum(output_total_tokens) from inference_costs").fetchall() == con.sql(
            "select count(*), sum(output_total_tokens) from inferences"
        ).fetchall()
        # genai-prices prices every model of the corpus (LIST_PRICES, below): none is unpriced
        models = {m for (m,) in con.sql("select distinct model from inferences where model is not null").fetchall()}
        assert models <= LIST_PRICES.keys(), models - LIST_PRICES.keys()
        assert con.sql("select model from unpriced_models").fetchall() == []


# The views on the real corpus. Each expected frame below is computed from the base tables (and
# LIST_PRICES for prices) by what docs/asr-tables.md and the view's header say it counts.

# genai-prices 0.2.5's list prices of the models of the corpus and of the Codex rollouts, written out
# from its data: model -> rows (first day, least total input, (input, output, 5m cache write, 1h cache
# write, cache read) in USD per million tokens). None: no price of its own, the token billed as input
# (a 1h write: at the 5m price). ALWAYS: a model's first price, in force before any later one.
ALWAYS = date(1, 1, 1)
OPUS = (5, 25, 6.25, 10, 0.5)
SONNET, SONNET_LONG = (3, 15, 3.75, 6, 0.3), (6, 22.5, 7.5, 12, 0.6)  # over 200,000 input tokens
LIST_PRICES = {
    "claude-fable-5": [(ALWAYS, 0, (10, 50, 12.5, 20, 1))],
    "claude-haiku-4-5-20251001": [(ALWAYS, 0, (1, 5, 1.25, 2, 0.1))],
    "claude-opus-4-20250514": [(ALWAYS, 0, (15, 75, 18.75, 30, 1.5))],
    "claude-opus-4-5-20251101": [(ALWAYS, 0, OPUS)],
    # priced by context length until 2026-03-13, flat from then on
    "claude-opus-4-6": [(ALWAYS, 0, OPUS), (ALWAYS, 200001, (10, 37.5, 12.5, 20, 1)), (date(2026, 3, 13), 0, OPUS)],
    "claude-opus-4-7": [(ALWAYS, 0, OPUS)],
    "claude-opus-4-8": [(ALWAYS, 0, OPUS)],
    "claude-sonnet-4-20250514": [(ALWAYS, 0, SONNET)],
    "claude-sonnet-4-5-20250929": [(ALWAYS, 0, SONNET), (ALWAYS, 200001, SONNET_LONG)],
    "claude-sonnet-4-6": [(ALWAYS, 0, SONNET), (ALWAYS, 200001, SONNET_LONG), (date(2026, 3, 13), 0, SONNET)],
    # OpenAI lists no cache write price for these: Codex reports none
    "gpt-5.1-codex": [(ALWAYS, 0, (1.25, 10, None, None, 0.125))],
    "gpt-5.3-codex": [(ALWAYS, 0, (1.75, 14, None, None, 0.175))],
}


def list_price(model: str, day: date, input_total: int | None) -> tuple | None:
    """The LIST_PRICES row in force: the latest first day on or before `day`, then the largest least
    total input not above the response's (unknown: the base price); None when there is none."""
    dated = [p for p in LIST_PRICES.get(model, []) if p[0] <= day]
    if not dated:
        return None
    latest = max(p[0] for p in dated)
    return max((p for p in dated if p[0] == latest and p[1] <= (input_total or 0)), key=lambda p: p[1])


def list_cost(prices: tuple, uncached: int, output: int, read: int, write_5m: int, write_1h: int) -> float:
    """USD of a response's tokens at `prices`, a price the row lacks taken as genai-prices does."""
    inp, out, w5m, w1h, cached = prices
    w5m = inp if w5m is None else w5m
    return (uncached * inp + output * out + read * (inp if cached is None else cached)
            + write_5m * w5m + write_1h * (w5m if w1h is None else w1h)) / 1e6
Expected = Callable[[Mapping[str, pl.DataFrame], pl.DataFrame], pl.DataFrame]
CORPUS_EXPECTED: dict[str, Expected] = {}
UNORDERED = {"inference_costs": "inference_id"}  # a view without `order by`: compared sorted by this key


def expects(name: str) -> Callable[[Expected], Expected]:
    """Register the independent computation of a view's rows on the corpus (tables, priced inferences)."""
    def register(fn: Expected) -> Expected:
        CORPUS_EXPECTED[name] = fn
        return fn
    return register


def total(column: str | pl.Expr) -> pl.Expr:
    """A sum that is null when no value is, as SQL's sum (Polars gives 0)."""
    e = pl.col(column) if isinstance(column, str) else column
    return pl.when(e.is_not_null().any()).then(e.sum())


def ratio(part: str, whole: str) -> pl.Expr:
    """part / whole, null when whole is 0 or null."""
    return pl.when(pl.col(whole) != 0).then(pl.col(part) / pl.col(whole))


def count(condition: pl.Expr) -> pl.Expr:
    """The rows where condition holds (null: not counted)."""
    return condition.fill_null(False).sum()


def same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Same columns and rows in the same order; integer widths and the name of UTC may differ."""
    def norm(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(cs.datetime().dt.convert_time_zone("UTC"))
    assert_frame_equal(norm(got), norm(want), check_dtypes=False, check_column_order=False, rel_tol=1e-9,
                       abs_tol=1e-12)


def roots(sessions: pl.DataFrame) -> pl.DataFrame:
    """Each stream's root: its parent_session_key followed up (through a parent not in the output)."""
    walked = walk_roots(dict(sessions.select("session_key", "parent_session_key").iter_rows()))
    return pl.DataFrame({"session_key": list(walked), "root_session_key": list(walked.values())},
                        schema={"session_key": pl.String, "root_session_key": pl.String})


def test_claude_code_subagents_root_at_their_main_session(corpus_tables):
    # the corpus is Claude Code's: a subagent's or sidechain's key is <main session>/<agent>, its root the main
    # session (in the output or not)
    walked = roots(corpus_tables["sessions"]).join(corpus_tables["sessions"], on="session_key")
    assert walked.height == corpus_tables["sessions"].height
    assert (walked["root_session_key"] == walked["session_key"].str.split("/").list.first()).all()
    assert (walked["root_session_key"] == walked["root_session_key_right"]).all()
    assert walked.filter(pl.col("stream_kind") != "main").height > 0


@pytest.fixture(scope="module")
def corpus_views(corpus_out: Path) -> dict[str, pl.DataFrame]:
    with duckdb.connect(str(corpus_out / "asr.duckdb"), read_only=True) as con:
        return {name: con.table(name).pl() for name in view_files()}


@pytest.fixture(scope="module")
def corpus_costs(corpus_tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Each inference of the corpus located and priced here: its response's UTC day, the project of
    its main session (else its own cwd), the LIST_PRICES row in force that day for its total input."""
    t = corpus_tables
    streams = t["sessions"].select("session_key", "agent", "stream_kind", "cwd")
    located = (
        t["inferences"]
        .join(t["records"].select("record_id", responded_at="timestamp"), on="record_id", how="left", validate="m:1")
        .join(roots(t["sessions"]), on="session_key", how="left")
        .with_columns(root_session_key=pl.coalesce("root_session_key", "session_key"))
        .join(streams, on="session_key", how="left")
        .join(streams.select(root_session_key="session_key", root_cwd="cwd"), on="root_session_key", how="left")
        .with_columns(
            is_subagent=pl.col("root_session_key") != pl.col("session_key"),
            project=pl.coalesce("root_cwd", "cwd"),
            day=pl.col("responded_at").dt.convert_time_zone("UTC").dt.date(),
            # input is uncached + cache reads + cache writes (docs, Usage): summed here, not read
            total_tokens=pl.col("input_uncached_tokens") + pl.col("cache_read_tokens") + pl.col("cache_write_tokens")
            + pl.col("output_total_tokens"),
        )
    )
    effective, least, costs, charges_writes = [], [], [], []
    for i in located.iter_rows(named=True):
        p = list_price(i["model"], i["day"], i["input_total_tokens"])
        if p is None:  # no price that day: unknown, never 0
            effective.append(None)
            least.append(None)
            costs.append(None)
            charges_writes.append(True)
            continue
        day, tokens, prices = p
        charges_writes.append(bool(prices[2]) or bool(prices[3]))
        n = {k: i[k] or 0 for k in ("input_uncached_tokens", "output_total_tokens", "cache_read_tokens",
                                    "cache_write_tokens", "cache_write_1h_tokens")}
        # the 1h writes at the 1h price, the rest of the aggregate at the 5m price
        write_5m = max(n["cache_write_tokens"] - n["cache_write_1h_tokens"], 0)
        effective.append(day)
        least.append(tokens)
        costs.append(list_cost(prices, n["input_uncached_tokens"], n["output_total_tokens"], n["cache_read_tokens"],
                               write_5m, n["cache_write_1h_tokens"]))
    return located.with_columns(
        price_effective_date=pl.Series(effective, dtype=pl.Date),
        price_min_input_tokens=pl.Series(least, dtype=pl.Int64),
        cost_usd=pl.Series(costs, dtype=pl.Float64),
        charges_writes=pl.Series(charges_writes, dtype=pl.Boolean),
    ).with_columns(
        is_priced=pl.col("price_effective_date").is_not_null(),
        # a placeholder output or a count not reported: the cost is at least this (cache writes not
        # reported only where the price in force charges them, or where there is none)
        is_cost_lower_bound=~pl.col("usage_complete") | pl.any_horizontal(
            pl.col("input_uncached_tokens", "output_total_tokens", "cache_read_tokens").is_null()
        ) | (pl.col("cache_write_tokens").is_null() & pl.col("charges_writes")),
    )


@expects("inference_costs")
def _inference_costs(t, costs):
    return costs.select(
        "inference_id", "session_key", "root_session_key", "stream_kind", "is_subagent", "project", "agent", "model",
        "responded_at", "day", "usage_complete", "usage_source", "input_uncached_tokens", "cache_read_tokens",
        "cache_write_tokens", "cache_write_1h_tokens", "input_total_tokens", "output_total_tokens", "total_tokens",
        "price_effective_date", "price_min_input_tokens", "is_priced", "cost_usd", "is_cost_lower_bound",
    )


def usage_totals() -> dict[str, pl.Expr]:
    return dict(
        inferences=pl.len(),
        input_uncached_tokens=total("input_uncached_tokens"),
        cache_read_tokens=total("cache_read_tokens"),
        cache_write_tokens=total("cache_write_tokens"),
        output_total_tokens=total("output_total_tokens"),
        total_tokens=total("total_tokens"),
        cost_usd=total("cost_usd"),
        unpriced_inferences=count(~pl.col("is_priced")),
        incomplete_inferences=count(~pl.col("usage_complete")),
        is_lower_bound=pl.col("is_cost_lower_bound").any(),
    )


def unpriced_model_names() -> pl.Expr:
    return pl.col("model").filter(~pl.col("is_priced")).unique().sort()


@expects("usage_by_day")
def _usage_by_day(t, costs):
    return costs.group_by("day", "agent", "model").agg(**usage_totals()).sort("day", "agent", "model", nulls_last=True)


@expects("usage_by_project")
def _usage_by_project(t, costs):
    return (
        costs.group_by("project")
        .agg(sessions=pl.col("root_session_key").n_unique(), unpriced_models=unpriced_model_names(), **usage_totals())
        .sort("cost_usd", "project", descending=[True, False], nulls_last=True)
    )


@expects("usage_by_session")
def _usage_by_session(t, costs):
    titles = t["sessions"].select(root_session_key="session_key", title="title", first_prompt="first_prompt")
    return (
        costs.group_by("root_session_key")
        .agg(
            # one per main session on the corpus (a subagent without its main session has its own cwd)
            project=pl.col("project").unique().first(),
            models=pl.col("model").unique().sort(),
            streams=pl.col("session_key").n_unique(),
            unpriced_models=unpriced_model_names(),
            first_response_at=pl.col("responded_at").min(),
            last_response_at=pl.col("responded_at").max(),
            **usage_totals(),
        )
        .join(titles, on="root_session_key", how="left")
        .sort("root_session_key")
    )


@expects("costliest_sessions")
def _costliest_sessions(t, costs):
    sessions = _usage_by_session(t, costs)
    return (
        sessions.sort("cost_usd", "root_session_key", descending=[True, False], nulls_last=True)
        .with_row_index("cost_rank", offset=1)
        # the share of the cost of every session, not of the 25 shown
        .with_columns(share_of_cost=pl.col("cost_usd") / pl.col("cost_usd").sum())
        .head(25)
        .drop("streams", "input_uncached_tokens", "cache_read_tokens", "cache_write_tokens", "unpriced_inferences",
              "incomplete_inferences")
    )


@expects("cache_hit_ratio")
def _cache_hit_ratio(t, costs):
    parts = ["input_uncached_tokens", "cache_read_tokens", "cache_write_tokens"]
    return (
        costs.filter(pl.all_horizontal(pl.col(parts).is_not_null()))  # only inferences reporting all three
        .group_by("day", "agent", "model")
        .agg(pl.len().alias("inferences"), pl.sum_horizontal(parts).sum().alias("input_total_tokens"),
             pl.col(parts).sum())
        .with_columns(cache_hit_ratio=ratio("cache_read_tokens", "input_total_tokens"),
                      cache_write_ratio=ratio("cache_write_tokens", "input_total_tokens"))
        .sort("day", "agent", "model", nulls_last=True)
    )


@expects("subagent_share")
def _subagent_share(t, costs):
    sub = pl.col("is_subagent")
    return (
        costs.group_by("root_session_key")
        .agg(
            project=pl.col("project").unique().first(),
            subagent_streams=pl.col("session_key").filter(sub).n_unique(),
            inferences=pl.len(),
            subagent_inferences=count(sub),
            total_tokens=total("total_tokens"),
            # the main streams add 0: null only when every stream is a subagent's without a count
            subagent_tokens=total(pl.when(sub).then(pl.col("total_tokens")).otherwise(0)),
            cost_usd=total("cost_usd"),
            subagent_cost_usd=total(pl.when(sub).then(pl.col("cost_usd")).otherwise(0.0)),
        )
        .with_columns(subagent_token_share=ratio("subagent_tokens", "total_tokens"),
                      subagent_cost_share=ratio("subagent_cost_usd", "cost_usd"))
        .sort("root_session_key")
    )


@expects("usage_completeness")
def _usage_completeness(t, costs):
    incomplete = ~pl.col("usage_complete")
    return (
        costs.group_by("agent", "model")
        .agg(
            inferences=pl.len(),
            incomplete_inferences=count(incomplete),
            from_agent_progress=count(pl.col("usage_source") == "agent_progress"),
            output_total_tokens=total("output_total_tokens"),
            output_tokens_lower_bound=pl.col("output_total_tokens").filter(incomplete).sum(),
            cost_usd=total("cost_usd"),
            # unknown where the cost is: an unpriced model's lower bound is not 0
            cost_usd_lower_bound=pl.when(pl.col("cost_usd").is_not_null().any())
            .then(pl.col("cost_usd").filter(incomplete).sum()),
        )
        .with_columns(
            incomplete_share=pl.col("incomplete_inferences") / pl.col("inferences"),
            output_lower_bound_share=ratio("output_tokens_lower_bound", "output_total_tokens"),
            cost_lower_bound_share=ratio("cost_usd_lower_bound", "cost_usd"),
        )
        .sort("inferences", "agent", "model", descending=[True, False, False], nulls_last=True)
    )


@expects("unpriced_models")
def _unpriced_models(t, costs):
    first_price = {model: min(p[0] for p in rows) for model, rows in LIST_PRICES.items()}
    return (
        costs.filter(~pl.col("is_priced"))
        .group_by("agent", "model")
        .agg(inferences=pl.len(), total_tokens=total("total_tokens"), output_total_tokens=total("output_total_tokens"),
             first_day=pl.col("day").min(), last_day=pl.col("day").max())
        .with_columns(priced_from=pl.col("model").replace_strict(first_price, default=None, return_dtype=pl.Date))
        .sort("inferences", "agent", "model", descending=[True, False, False], nulls_last=True)
    )


@expects("tool_rates")
def _tool_rates(t, costs):
    status = pl.col("status")
    return (
        t["tool_calls"].group_by("tool_kind")
        .agg(
            tools=pl.col("tool_name").drop_nulls().n_unique(),
            calls=pl.len(),
            pending_calls=count(status == "pending"),
            completed_calls=count(status == "completed"),
            error_calls=count(status == "error"),
            denied_calls=count(status == "denied"),
            interrupted_calls=count(status.is_in(["interrupted", "cancelled"])),
            answered=count(status != "pending"),  # rates are over the calls with a result
        )
        .with_columns(error_rate=ratio("error_calls", "answered"), denial_rate=ratio("denied_calls", "answered"),
                      interruption_rate=ratio("interrupted_calls", "answered"))
        .drop("answered")
        .sort("calls", "tool_kind", descending=[True, False])
    )


@expects("approvals")
def _approvals(t, costs):
    return (
        t["tool_calls"].filter(pl.col("permission").is_not_null() | pl.col("permission_decided_by").is_not_null())
        .group_by(decided_by="permission_decided_by", decision="permission", evidence="permission_evidence")
        .agg(calls=pl.len(), tools=pl.col("tool_name").drop_nulls().n_unique(),
             denied_calls=count(pl.col("status") == "denied"))
        .with_columns(share=pl.col("calls") / pl.col("calls").sum())
        .sort("calls", "decided_by", "decision", "evidence", descending=[True, False, False, False])
    )


@expects("hook_failures")
def _hook_failures(t, costs):
    statuses = pl.col("statuses")
    executions = (
        # the reports sharing an execution_key are one execution
        t["hooks"].group_by("execution_key")
        .agg(event=pl.col("event").first(), command=pl.col("command").drop_nulls().first(),
             statuses=pl.col("status").unique(), timed_out=pl.col("is_timed_out").any())
        .with_columns(
            command=pl.col("command").fill_null(""),
            # the worst status reported is the outcome
            outcome=pl.when(statuses.list.eval(pl.element().is_in(["error", "non_blocking_error", "cancelled"])).list.any())
            .then(pl.lit("failed"))
            .when(statuses.list.contains("blocked")).then(pl.lit("blocked"))
            .when(statuses.list.eval(pl.element().is_in(["success", "async_response"])).list.any())
            .then(pl.lit("succeeded"))
            .otherwise(pl.lit("unknown")),
        )
    )
    outcome = pl.col("outcome")
    return (
        executions.group_by("event", "command")
        .agg(executions=pl.len(), failed=count(outcome == "failed"), blocked=count(outcome == "blocked"),
             succeeded=count(outcome == "succeeded"), unknown_outcome=count(outcome == "unknown"),
             timed_out=count(pl.col("timed_out")))
        # unknown outcomes are left out of the rate
        .with_columns(known=pl.col("executions") - pl.col("unknown_outcome"))
        .with_columns(failure_rate=ratio("failed", "known"))
        .drop("known")
        .sort("failed", "executions", "event", "command", descending=[True, True, False, False])
    )


@expects("compactions_per_session")
def _compactions_per_session(t, costs):
    kind = pl.col("compaction_kind")
    counted = t["compactions"].group_by("session_key").agg(
        full_compactions=count(kind == "full"),
        micro_compactions=count(kind == "micro"),
        prunes=count(kind == "prune"),
        auto_full_compactions=count((kind == "full") & (pl.col("trigger") == "auto")),
        max_pre_tokens=pl.col("pre_tokens").filter(kind == "full").max(),
        first_compaction_at=pl.col("recorded_at").min(),
    )
    zeros = ["full_compactions", "micro_compactions", "prunes", "auto_full_compactions"]
    return (
        # every stream, with zeros when it has no compaction
        t["sessions"].select("session_key", "stream_kind")
        .join(counted, on="session_key", how="left")
        .with_columns(pl.col(zeros).fill_null(0))
        .with_columns(compactions=pl.col("full_compactions") + pl.col("micro_compactions") + pl.col("prunes"))
        .sort("compactions", "session_key", descending=[True, False])
    )


@expects("session_stats")
def _session_stats(t, costs):
    users = (
        t["records"].filter(pl.col("kind") == "message", pl.col("native_type") == "user")
        .sort("session_key", "seq").iter_rows(named=True)
    )
    turns: Counter[str] = Counter()
    for key, messages in groupby(users, key=lambda m: m["session_key"]):
        messages = list(messages)
        for m, after in zip(messages, messages[1:] + [None]):
            if m["is_meta"] or m["author"] in ("harness", "hook", "tool") or m["origin"] == "injected":
                continue
            # a slash command is a turn only when Claude Code expanded it into the meta prompt that follows
            if m["origin"] == "command" and not (after is not None and after["is_meta"]):
                continue
            turns[key] += 1
    records = t["records"].group_by("session_key").agg(
        records=pl.len(),
        # first to last timestamp of the stream
        duration_minutes=(pl.col("timestamp").max() - pl.col("timestamp").min()).dt.total_milliseconds() / 60000,
    )
    per_stream = {
        "turns": pl.DataFrame({"session_key": list(turns), "turns": list(turns.values())},
                              schema={"session_key": pl.String, "turns": pl.Int64}),
        "inferences": t["inferences"].group_by("session_key").agg(inferences=pl.len()),
        "tool_calls": t["tool_calls"].group_by("session_key").agg(tool_calls=pl.len()),
    }
    frame = t["sessions"].select("session_key", "stream_kind", "title", "cwd", "started_at", "ended_at").join(
        records, on="session_key", how="left"
    ).join(roots(t["sessions"]), on="session_key").with_columns(records=pl.col("records").fill_null(0))
    for column, counts in per_stream.items():
        frame = frame.join(counts, on="session_key", how="left").with_columns(pl.col(column).fill_null(0))
    return frame.sort("started_at", "session_key", nulls_last=True)


@pytest.mark.parametrize("name", sorted(view_files()))
def test_view_on_the_real_corpus_is_recomputed_from_the_tables(name, corpus_views, corpus_tables, corpus_costs):
    # a new view needs its figures recomputed here too
    assert name in CORPUS_EXPECTED, f"{name}: no independent computation in tests/sql/test_views.py"
    want = CORPUS_EXPECTED[name](corpus_tables, corpus_costs)
    # the corpus exercises every other view (genai-prices prices each of its models:
    # unpriced_models is exercised by the authored outputs)
    assert want.height > 0 or name == "unpriced_models", name
    got = corpus_views[name]
    if name in UNORDERED:
        got, want = got.sort(UNORDERED[name]), want.sort(UNORDERED[name])
    same(got, want)


def test_every_view_is_documented():
    docs = (ROOT / "docs" / "asr-tables.md").read_text()
    for name in view_files():
        assert f"| `{name}` |" in docs, name


# Both agents in one output: the real Codex rollouts and Claude Code transcripts, converted together.

CODEX_ROLLOUTS = sorted((ROOT / "tests" / "fixtures" / "codex").glob("*.jsonl"))
UNKNOWN_MODEL = "claude-preview-0"
SMALL_CLAUDE_CODE = CORPUS / "chiphuyen-sniffly" / "fed8ce56-bc79-401f-a83e-af084253362f.jsonl"


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Codex rollouts with a small real Claude Code transcript (a priced model, placeholder output
    counts) and an authored one whose response is of a model genai-prices does not know."""
    tmp = tmp_path_factory.mktemp("two-agents")
    early = write_jsonl(tmp / "projects" / "-home-user-project" / f"{SID}.jsonl", [
        user(uid(1), None, "Hello"),
        assistant(uid(2), uid(1), "msg_01EarlyResponse", [TEXT], model=UNKNOWN_MODEL, stop="end_turn"),
    ])
    out = tmp / "out"
    batch.convert([*CODEX_ROLLOUTS, SMALL_CLAUDE_CODE, early], out)
    return out


def test_views_group_claude_code_and_codex_apart(two_agents: Path):
    assert len(CODEX_ROLLOUTS) == 5
    t = read_tables(two_agents)

    def priced(model: str, day: date) -> bool:
        return list_price(model, day, None) is not None

    # each inference with the agent of its stream (sessions) and the UTC day of its response (records)
    located = (
        t["inferences"]
        .join(t["sessions"].select("session_key", "agent"), on="session_key", how="left", validate="m:1")
        .join(t["records"].select("record_id", "timestamp"), on="record_id", how="left", validate="m:1")
        .with_columns(
            day=pl.col("timestamp").dt.convert_time_zone("UTC").dt.date(),
            # input_total_tokens includes the cache reads (and writes) for both agents
            total_tokens=pl.col("input_total_tokens") + pl.col("output_total_tokens"),
        )
    )
    inf = located.with_columns(is_priced=pl.Series(
        [priced(m, d) for m, d in located.select("model", "day").iter_rows()], dtype=pl.Boolean))
    assert set(inf["agent"]) == {CC, CODEX}
    assert inf.filter(pl.col("agent") == CODEX).height > 300  # every response of the five rollouts
    unpriced = ~pl.col("is_priced")
    sums = dict(output_total_tokens=total("output_total_tokens"), total_tokens=total("total_tokens"))

    with duckdb.connect(str(two_agents / "asr.duckdb"), read_only=True) as con:
        def view(query: str) -> pl.DataFrame:
            return con.sql(query).pl()

        by_day = view("""
            select day, agent, model, inferences, output_total_tokens, total_tokens, unpriced_inferences,
                   incomplete_inferences, cost_usd
            from usage_by_day
        """)
        same(by_day.drop("cost_usd"), inf.group_by("day", "agent", "model").agg(
            inferences=pl.len(), unpriced_inferences=count(unpriced),
            incomplete_inferences=count(~pl.col("usage_complete")), **sums,
        ).sort("day", "agent", "model"))
        # a day without a price has no cost, never 0; a priced day has one
        assert by_day.filter(pl.col("unpriced_inferences") > 0)["cost_usd"].null_count() == by_day.filter(
            pl.col("unpriced_inferences") == pl.col("inferences")).height
        assert (by_day.filter(pl.col("unpriced_inferences") == 0)["cost_usd"] > 0).all()
        # a Codex day's cost: uncached input (its input count less the cache reads), cache reads and
        # output at genai-prices' list price, OpenAI billing no cache writes for these models
        expected = {}
        for m, d, inp, cached, out in inf.filter((pl.col("agent") == CODEX) & pl.col("is_priced")).select(
                "model", "day", "input_total_tokens", "cache_read_tokens", "output_total_tokens").iter_rows():
            usd = list_cost(list_price(m, d, inp)[2], inp - cached, out, cached, 0, 0)
            expected[(d, m)] = expected.get((d, m), 0.0) + usd
        got = {(d, m): c for d, m, c in by_day.filter((pl.col("agent") == CODEX) & pl.col("cost_usd").is_not_null())
               .select("day", "model", "cost_usd").iter_rows()}
        assert got.keys() == expected.keys() and len(got) >= 2
        for key, usd in expected.items():
            assert got[key] == pytest.approx(usd, rel=1e-9), key

        completeness = view("select agent, model, inferences, incomplete_inferences, output_total_tokens, cost_usd "
                            "from usage_completeness")
        same(completeness.drop("cost_usd"), inf.group_by("agent", "model").agg(
            inferences=pl.len(), incomplete_inferences=count(~pl.col("usage_complete")),
            output_total_tokens=total("output_total_tokens"),
        ).sort("inferences", "agent", "model", descending=[True, False, False]))
        assert set(completeness["agent"]) == {CC, CODEX}
        codex_costs = dict(completeness.filter(pl.col("agent") == CODEX).select("model", "cost_usd").iter_rows())
        assert sorted(codex_costs) == ["gpt-5.1-codex", "gpt-5.3-codex"] and min(codex_costs.values()) > 0
        # the cost of a Codex response with a final usage report is exact: the cache writes Codex does
        # not report are not billed for these models
        flags = view("select usage_complete, is_cost_lower_bound, cache_write_tokens from inference_costs "
                     "where agent = 'codex'")
        assert flags["cache_write_tokens"].is_null().all()
        assert flags["is_cost_lower_bound"].to_list() == (~flags["usage_complete"]).to_list()

        missing = view("select agent, model, inferences, total_tokens, output_total_tokens, first_day, last_day "
                       "from unpriced_models")
        same(missing, inf.filter(unpriced).group_by("agent", "model").agg(
            inferences=pl.len(), first_day=pl.col("day").min(), last_day=pl.col("day").max(), **sums,
        ).sort("inferences", "agent", "model", descending=[True, False, False]))
        # only the Claude Code response of a model genai-prices does not know: the rollouts' models are priced
        assert missing.select("agent", "model").rows() == [(CC, UNKNOWN_MODEL)]

        # Codex's input count includes its cache reads: the ratio is over it, not over a sum of parts
        same(view("select day, agent, model, inferences, input_total_tokens, cache_read_tokens, cache_hit_ratio "
                  "from cache_hit_ratio"),
             inf.filter(pl.col("input_total_tokens").is_not_null()).group_by("day", "agent", "model")
             .agg(pl.len().alias("inferences"), pl.col("input_total_tokens", "cache_read_tokens").sum())
             .with_columns(cache_hit_ratio=ratio("cache_read_tokens", "input_total_tokens"))
             .sort("day", "agent", "model"))
