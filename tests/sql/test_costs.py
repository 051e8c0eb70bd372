"""The catalog's `model_prices` from genai-prices and a price file, and `inference_costs` priced by
it: dated prices, context tiers, overrides, unknown models, cache writes per vendor.

An authored output (only the columns the views read) of a Claude Code stream C and a Codex stream X.
The genai-prices figures below are written out from its 0.2.5 data, per million tokens (input,
output, 5m cache write, 1h cache write, cache read; OpenAI lists no 1h write):
- claude-opus-4-8: 5, 25, 6.25, 10, 0.5, flat (no tier).
- claude-sonnet-4-5 (claude-sonnet-4-5-20250929 by its match rules): 3, 15, 3.75, 6, 0.3, and for a
  request whose total input exceeds 200,000 tokens 6, 22.5, 7.5, 12, 0.6.
- gpt-5.5: 5, 30, no write price, 0.5; over 272,000 input tokens 10, 45, 1.
- gpt-5.6-luna: 1, 6, 1.25, 0.1 (over 272,000: 2, 9, 2.5, 0.2); from 2026-07-30 0.2, 1.2, 0.25,
  0.02 (over 272,000: 0.4, 1.8, 0.5, 0.04).
The price file (PRICES) sets claude-opus-4-8 at 1, 2, 3, 4, 0.5 from 2026-06-20. claude-unknown-9 is
in neither.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from batch.output.catalog import write_catalog
from batch.output.prices import read_prices
from batch.schema import TABLES

C, X = "C", "X"
PRICES = """model,effective_date,input_usd_per_mtok,output_usd_per_mtok,cache_write_5m_usd_per_mtok,cache_write_1h_usd_per_mtok,cache_read_usd_per_mtok,source,checked_on
claude-opus-4-8,2026-06-20,1,2,3,4,0.5,my list,2026-06-18
"""


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def claude(iid, model, when, uncached, read, write, w1h, output):
    """A Claude Code response: its input count excludes the cache."""
    total = None if None in (uncached, read, write) else uncached + read + write
    return iid, C, model, at(when), dict(
        input_uncached_tokens=uncached, cache_read_tokens=read, cache_write_tokens=write, cache_write_1h_tokens=w1h,
        input_total_tokens=total, output_total_tokens=output, input_includes_cache=False,
    )


def codex(iid, model, when, input_, read, write, output):
    """A Codex response: its input count includes the cache; writes reported only where billed."""
    return iid, X, model, at(when), dict(
        input_uncached_tokens=input_ - read - (write or 0), cache_read_tokens=read, cache_write_tokens=write,
        cache_write_1h_tokens=None, input_total_tokens=input_, output_total_tokens=output, input_includes_cache=True,
    )


RESPONSES = [
    claude("c1", "claude-opus-4-8", "2026-06-19 23:59", 1000, 20000, 3000, 1000, 500),
    claude("c2", "claude-opus-4-8", "2026-06-20 00:01", 1000, 20000, 3000, 1000, 500),
    claude("c3", "claude-sonnet-4-5-20250929", "2026-01-10 10:00", 10, 150000, 50000, 0, 100),  # 200,010 input
    claude("c4", "claude-sonnet-4-5-20250929", "2026-01-10 10:01", 10, 150000, 49990, 0, 100),  # 200,000 input
    claude("c5", "claude-unknown-9", "2026-06-20 08:00", 1, 2, 3, 0, 4),
    codex("x1", "gpt-5.5", "2026-06-01 09:00", 12000, 8000, None, 300),
    codex("x2", "gpt-5.5", "2026-06-01 09:05", 300000, 280000, None, 1000),
    codex("x3", "gpt-5.6-luna", "2026-07-29 23:30", 10000, 6000, 1000, 200),
    codex("x4", "gpt-5.6-luna", "2026-07-30 00:10", 10000, 6000, 1000, 200),
    codex("x5", "gpt-5.6-luna", "2026-07-30 00:20", 10000, 6000, None, 200),
]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The authored output's catalog, its prices from genai-prices and PRICES."""
    out = tmp_path_factory.mktemp("costs") / "out"
    rows = {
        "sessions": [dict(session_key=C, agent="claude-code", stream_kind="main", cwd="/p/c"),
                     dict(session_key=X, agent="codex", stream_kind="main", cwd="/p/x")],
        "inferences": [dict(inference_id=i, session_key=s, record_id=f"{s}:{i}", model=m, usage_complete=True,
                            usage_source="transcript", **tokens) for i, s, m, _, tokens in RESPONSES],
        "records": [dict(record_id=f"{s}:{i}", session_key=s, kind="message", native_type="assistant",
                         timestamp=when, inference_id=i, model=m) for i, s, m, when, _ in RESPONSES],
    }
    for table in TABLES:
        (out / table.name).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows.get(table.name, []), schema=table.schema),
                       out / table.name / "part-00000.parquet")
    (out / "manifest.json").write_text(json.dumps({"format": {"name": "asr", "version": "0.1"}}))
    prices = out.parent / "prices.csv"
    prices.write_text(PRICES)
    write_catalog(out, out, overrides=read_prices(prices))
    return out / "asr.duckdb"


@pytest.fixture
def con(catalog: Path):
    with duckdb.connect(str(catalog), read_only=True) as con:
        yield con


def costs(con) -> dict[str, tuple]:
    """inference_id -> (price_effective_date, price_min_input_tokens, cost_usd rounded, is_cost_lower_bound)."""
    return {
        iid: (day, least, None if cost is None else round(cost, 9), lower)
        for iid, day, least, cost, lower in con.sql(
            "select inference_id, price_effective_date, price_min_input_tokens, cost_usd, is_cost_lower_bound "
            "from inference_costs"
        ).fetchall()
    }


ALWAYS = date(1, 1, 1)  # genai-prices' first price of a model applies to every day before the next one


def test_a_model_genai_prices_knows_is_priced_at_its_list_price(con):
    got = costs(con)
    # 1000x5 + 500x25 + 20000x0.5 + 1000x10 (1h) + 2000x6.25 (5m) = 50,000
    assert got["c1"] == (ALWAYS, 0, 0.05, False)
    # Codex gpt-5.5: (12000 - 8000)x5 + 300x30 + 8000x0.5 = 33,000; OpenAI bills it no cache write,
    # so the write count Codex does not report changes nothing: not a lower bound
    assert got["x1"] == (ALWAYS, 0, 0.033, False)


def test_a_price_file_takes_over_from_its_date_not_before(con):
    got = costs(con)
    assert got["c1"][:3] == (ALWAYS, 0, 0.05)  # 23:59 UTC on the day before: genai-prices
    # 1000x1 + 500x2 + 20000x0.5 + 1000x4 + 2000x3 = 22,000
    assert got["c2"] == (date(2026, 6, 20), 0, 0.022, False)


def test_a_dated_price_change_applies_from_its_day(con):
    got = costs(con)
    # 3000x1 + 200x6 + 6000x0.1 + 1000x1.25 = 6,050 on 2026-07-29 (23:30 UTC)
    assert got["x3"] == (ALWAYS, 0, 0.00605, False)
    # 3000x0.2 + 200x1.2 + 6000x0.02 + 1000x0.25 = 1,210 from 2026-07-30
    assert got["x4"] == (date(2026, 7, 30), 0, 0.00121, False)


def test_a_context_tier_prices_the_whole_request_above_its_threshold(con):
    got = costs(con)
    # 200,010 input tokens: 10x6 + 100x22.5 + 150000x0.6 + 50000x7.5 = 467,310
    assert got["c3"] == (ALWAYS, 200001, 0.46731, False)
    # exactly 200,000: the base price, 10x3 + 100x15 + 150000x0.3 + 49990x3.75 = 233,992.5
    assert got["c4"] == (ALWAYS, 0, 0.2339925, False)
    # Codex gpt-5.5 over 272,000: 20000x10 + 1000x45 + 280000x1 = 525,000
    assert got["x2"] == (ALWAYS, 272001, 0.525, False)


def test_a_cache_write_count_not_reported_lowers_the_bound_only_where_writes_are_billed(con):
    got = costs(con)
    # gpt-5.6-luna bills cache writes: 4000x0.2 + 200x1.2 + 6000x0.02 = 1,160 is a lower bound
    assert got["x5"] == (date(2026, 7, 30), 0, 0.00116, True)
    assert not got["x1"][3] and not got["x2"][3]  # gpt-5.5 bills none


def test_an_unknown_model_is_unpriced_with_a_null_cost(con):
    assert costs(con)["c5"] == (None, None, None, False)  # every count reported: no lower bound either
    assert con.sql("select * from unpriced_models").fetchall() == [
        ("claude-code", "claude-unknown-9", 1, 10, 4, date(2026, 6, 20), date(2026, 6, 20), None),
    ]
    assert con.sql("select cost_usd, unpriced_inferences from usage_by_day where model = 'claude-unknown-9'"
                   ).fetchall() == [(None, 1)]


def test_model_prices_holds_the_models_of_the_output_from_genai_prices_and_the_file(con):
    today = datetime.now(UTC).date()
    source = f"genai-prices {version('genai-prices')}"
    rows = con.sql("select * from model_prices order by all").fetchall()
    d = Decimal
    assert [r[:8] for r in rows] == [
        ("claude-opus-4-8", ALWAYS, 0, d(5), d(25), d("6.25"), d(10), d("0.5")),
        ("claude-opus-4-8", date(2026, 6, 20), 0, d(1), d(2), d(3), d(4), d("0.5")),
        ("claude-sonnet-4-5-20250929", ALWAYS, 0, d(3), d(15), d("3.75"), d(6), d("0.3")),
        ("claude-sonnet-4-5-20250929", ALWAYS, 200001, d(6), d("22.5"), d("7.5"), d(12), d("0.6")),
        ("gpt-5.5", ALWAYS, 0, d(5), d(30), None, None, d("0.5")),
        ("gpt-5.5", ALWAYS, 272001, d(10), d(45), None, None, d(1)),
        ("gpt-5.6-luna", ALWAYS, 0, d(1), d(6), d("1.25"), None, d("0.1")),
        ("gpt-5.6-luna", ALWAYS, 272001, d(2), d(9), d("2.5"), None, d("0.2")),
        ("gpt-5.6-luna", date(2026, 7, 30), 0, d("0.2"), d("1.2"), d("0.25"), None, d("0.02")),
        ("gpt-5.6-luna", date(2026, 7, 30), 272001, d("0.4"), d("1.8"), d("0.5"), None, d("0.04")),
    ]
    sources = {(r[0], r[1]): r[8:] for r in rows}
    assert sources[("claude-opus-4-8", date(2026, 6, 20))] == ("my list", date(2026, 6, 18))
    # every other row from genai-prices, dated the day the catalog was built
    assert {v for k, v in sources.items() if k != ("claude-opus-4-8", date(2026, 6, 20))} <= {
        (source, today), (source, date.fromordinal(today.toordinal() - 1))}
