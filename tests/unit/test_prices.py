"""batch/output/prices.py: price files read and refused, their rows over genai-prices', the vendor
of each agent, and the shipped data/pricing.csv kept to what genai-prices lacks."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from batch.errors import BatchError
from batch.output.prices import ALWAYS, CSV_COLUMNS, model_prices, pricing_csv, read_prices

HEADER = ",".join(CSV_COLUMNS)
DAY = date(2026, 12, 1)


def price_file(tmp_path: Path, *lines: str, header: str = HEADER) -> Path:
    path = tmp_path / "prices.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def dates_and_inputs(frame: pl.DataFrame, model: str) -> list[tuple]:
    return frame.filter(pl.col("model") == model).select("effective_date", "min_input_tokens", "input_usd_per_mtok").rows()


def test_a_file_row_takes_a_model_over_from_its_date(tmp_path: Path):
    # genai-prices 0.2.5: gpt-5.6-luna at $1 input (over 272,000 tokens $2), from 2026-07-30 $0.20 ($0.40)
    rows = read_prices(price_file(tmp_path, "gpt-5.6-luna,2026-07-01,0.5,3,0.6,,0.05,mine,2026-06-30"))
    prices = model_prices([("gpt-5.6-luna", "codex")], overrides=[rows], checked_on=DAY)
    assert dates_and_inputs(prices, "gpt-5.6-luna") == [
        (ALWAYS, 0, Decimal(1)), (ALWAYS, 272001, Decimal(2)),  # before the file's first date
        (date(2026, 7, 1), 0, Decimal("0.5")),  # genai-prices' 2026-07-30 change is the file's to make
    ]


def test_a_higher_layer_wins_over_a_lower_one(tmp_path: Path):
    lower = read_prices(price_file(tmp_path, "m,2026-01-01,1,1,,,,a,", "m,2026-03-01,2,2,,,,a,"))
    upper = read_prices(price_file(tmp_path, "m,2026-02-01,3,3,,,,b,"))
    prices = model_prices([], overrides=[lower, upper], checked_on=DAY)
    assert dates_and_inputs(prices, "m") == [(date(2026, 1, 1), 0, Decimal(1)), (date(2026, 2, 1), 0, Decimal(3))]


def test_an_empty_cache_price_is_no_price_of_its_own_and_an_empty_source_the_file(tmp_path: Path):
    path = price_file(tmp_path, "m,2026-01-01,1.25,10,,,0.125,,")
    assert read_prices(path).row(0, named=True) == {
        "model": "m", "effective_date": date(2026, 1, 1), "min_input_tokens": 0,
        "input_usd_per_mtok": Decimal("1.25"), "output_usd_per_mtok": Decimal(10), "cache_write_5m_usd_per_mtok": None,
        "cache_write_1h_usd_per_mtok": None, "cache_read_usd_per_mtok": Decimal("0.125"), "source": str(path),
        "checked_on": None,
    }


def test_the_vendor_of_the_agent_names_the_model():
    prices = model_prices(
        [("gpt-5.5", "claude-code"), ("claude-opus-4-8", None), ("claude-opus-4-7", "gemini-cli"), ("gpt-5.4", "codex")],
        overrides=[], checked_on=DAY,
    )
    # Claude Code's responses are Anthropic's: gpt-5.5 is not one of its models; an agent of no known
    # vendor: the vendor whose match rules claim the name
    assert sorted(set(prices["model"])) == ["claude-opus-4-7", "claude-opus-4-8", "gpt-5.4"]


@pytest.mark.parametrize(("lines", "header", "message"), [
    ((), "model,day,input", ":1: the header must be model,effective_date,"),
    (("m,2026-13-01,1,1,,,,,",), HEADER, ":2: effective_date '2026-13-01' is not a date"),
    (("m,2026-01-01,,1,,,,,",), HEADER, ":2: input_usd_per_mtok and output_usd_per_mtok are required"),
    (("m,2026-01-01,1,-1,,,,,",), HEADER, ":2: output_usd_per_mtok '-1' is not a price"),
    (("m,2026-01-01,1,abc,,,,,",), HEADER, ":2: output_usd_per_mtok 'abc' is not a price"),
    (("m,2026-01-01,1,1,1e12,,,,",), HEADER, ":2: cache_write_5m_usd_per_mtok '1e12' is not a price"),
    (("m,2026-01-01,1,1,,,,,", "m,2026-01-01,2,2,,,,,"), HEADER, ":3: a second row for m on 2026-01-01"),
    (("m,2026-01-01,1,1",), HEADER, ":2: 9 fields expected"),
    ((",2026-01-01,1,1,,,,,",), HEADER, ":2: model and effective_date are required"),
])
def test_a_bad_price_file_is_refused_naming_the_line(tmp_path: Path, lines, header, message):
    path = price_file(tmp_path, *lines, header=header)
    with pytest.raises(BatchError, match=f"^{path}{message}"):
        read_prices(path)


def test_a_missing_price_file_is_refused(tmp_path: Path):
    with pytest.raises(BatchError, match="cannot be read .*laid out like data/pricing.csv"):
        read_prices(tmp_path / "absent.csv")


def test_the_shipped_price_file_holds_only_what_genai_prices_lacks_or_disagrees_with():
    shipped = read_prices(pricing_csv())
    for row in shipped.iter_rows(named=True):
        assert row["source"] and row["checked_on"], row  # each row says where and when it was checked
        genai = model_prices([(row["model"], None)], overrides=[], checked_on=DAY).filter(
            pl.col("effective_date") <= row["effective_date"], pl.col("min_input_tokens") == 0)
        same = [c for c in CSV_COLUMNS if c.endswith("_per_mtok")]
        assert genai.is_empty() or genai.tail(1).select(same).row(0) != tuple(row[c] for c in same), row
