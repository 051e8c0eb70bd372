"""The catalog's price list (`model_prices`): dated list prices of the models an output holds, from
the data genai-prices bundles, with the rows of price files on top (docs/decisions/015-prices.md).

genai-prices keeps a model's prices as a list in which a later price takes over from its start
date, and a price by context length as tiers of the request's total input (cache included). Each
becomes rows here: one per model, day a price takes effect (`effective_date`) and tier
(`min_input_tokens`: the least total input the row prices, 0 for the base price). Its first price
applies to every day before the next one starts: its row is dated `ALWAYS`. Only the snapshot of
the installed version is read, never the network, so a model's prices depend on that version alone.

Matching is genai-prices' own (a model's `match` rules: `claude-sonnet-4-5-20250929` is
claude-sonnet-4-5): among the models of the vendor of the agent (`VENDORS`), else, for another
agent, of the vendor whose rules claim the model's name. Standard prices only: the variants for
batch, flex, priority or fast service (`inferences.service_tier`) and time-of-day prices are not
applied. Token prices only: web searches and the like are not in the usage the tables hold.

A price file is laid out as `CSV_COLUMNS` (data/pricing.csv). Its rows take over a model from the
earliest effective_date it gives the model: the rows below it for that model from that day on are
dropped. An empty cache price means no price of its own (such tokens are billed as input, as
genai-prices does); 0 means free. The layers, lowest first: genai-prices, data/pricing.csv, --prices.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import date
from decimal import Decimal, InvalidOperation
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import ConditionalPrice, ModelInfo

from batch.errors import BatchError

# the installed genai-prices, whose data is read (named in each of its rows' `source`)
SOURCE = f"genai-prices {version('genai-prices')}"
# The vendor billing each agent's responses, by genai-prices' provider id.
VENDORS = {"claude-code": "anthropic", "codex": "openai"}
# The effective_date of a model's first price in genai-prices: it applies to every earlier day.
ALWAYS = date.min
PRICE = pl.Decimal(18, 9)
# price column -> genai-prices' price keys, the first one set wins. The 5m write is Anthropic's
# default TTL, genai-prices' `cache_write_mtok`.
PRICE_KEYS = {
    "input_usd_per_mtok": ("input_mtok",),
    "output_usd_per_mtok": ("output_mtok",),
    "cache_write_5m_usd_per_mtok": ("cache_write_5m_mtok", "cache_write_mtok"),
    "cache_write_1h_usd_per_mtok": ("cache_write_1h_mtok",),
    "cache_read_usd_per_mtok": ("cache_read_mtok",),
}
SCHEMA = {
    "model": pl.String,
    "effective_date": pl.Date,
    "min_input_tokens": pl.Int64,
    **{column: PRICE for column in PRICE_KEYS},
    "source": pl.String,
    "checked_on": pl.Date,
}
CSV_COLUMNS = tuple(c for c in SCHEMA if c != "min_input_tokens")
_REQUIRED = ("input_usd_per_mtok", "output_usd_per_mtok")


def pricing_csv() -> Path:
    """Return the price file shipped with asr-batch (inside the package, else the checkout's)."""
    package = Path(__file__).parent.parent
    packaged = package / "data" / "pricing.csv"
    return packaged if packaged.is_file() else package.parent / "data" / "pricing.csv"


def model_prices(
    models: Iterable[tuple[str, str | None]], *, overrides: Iterable[pl.DataFrame], checked_on: date
) -> pl.DataFrame:
    """Return the price rows of the (model, agent) pairs from genai-prices, with every row of
    `overrides` (frames of `read_prices`, lowest first) on top."""
    # imported here: about a tenth of a second, which the commands that price nothing do not pay
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    agents: dict[str, set[str | None]] = {}
    for model, agent in models:
        agents.setdefault(model, set()).add(agent)
    snapshot = DataSnapshot(providers=providers, from_auto_update=False)
    rows = []
    for model in sorted(agents):
        # the vendors of its agents in turn; an agent of no known vendor: any vendor claiming the name
        vendors = sorted({VENDORS.get(a) for a in agents[model]}, key=lambda v: (v is None, v or ""))
        info = next((i for v in vendors if (i := _find(snapshot, model, v)) is not None), None)
        if info is not None:
            rows += [{"model": model, **row, "source": SOURCE, "checked_on": checked_on} for row in _rows(info)]
    prices = pl.DataFrame(rows, schema=SCHEMA)
    for upper in overrides:
        prices = overlay(prices, upper)
    return prices.sort("model", "effective_date", "min_input_tokens")


def _find(snapshot: DataSnapshot, model: str, vendor: str | None) -> ModelInfo | None:
    """The genai-prices model `model` names among `vendor`'s (None: of the vendor claiming the name)."""
    try:
        return snapshot.find_provider_model(model, None, vendor, None)[1]
    except LookupError:
        return None


def _rows(info: ModelInfo) -> list[dict]:
    """The rows of a genai-prices model: per day a price starts, per tier; none without token prices."""
    from genai_prices.types import ConditionalPrice, TieredPrices

    listed = info.prices if isinstance(info.prices, list) else [ConditionalPrice(prices=info.prices)]
    # the first price applies when no later one does
    starts = [ALWAYS, *(_start(p) for p in listed[1:])]
    rows = []
    for day in sorted({s for s in starts if s is not None}):
        # on `day`, genai-prices takes the last price of the list that has started
        price = [p for p, s in zip(listed, starts) if s is not None and s <= day][-1].prices
        values = {column: next((v for k in keys if (v := getattr(price, k, None)) is not None), None)
                  for column, keys in PRICE_KEYS.items()}
        if any(values[column] is None for column in _REQUIRED):
            return []
        tiers = sorted({t.start + 1 for v in values.values() if isinstance(v, TieredPrices) for t in v.tiers})
        rows += [
            {"effective_date": day, "min_input_tokens": least,
             **{column: _tier_price(v, least) for column, v in values.items()}}
            for least in [0, *tiers]
        ]
    return rows


def _start(price: ConditionalPrice) -> date | None:
    """The first day a price of the list applies: every day without a constraint, none for a time of day."""
    from genai_prices.types import StartDateConstraint

    if price.constraint is None:
        return ALWAYS
    return price.constraint.start_date if isinstance(price.constraint, StartDateConstraint) else None


def _tier_price(value, least: int) -> Decimal | None:
    """The price of a request whose total input is at least `least` tokens (`value`: a price, a
    genai-prices `TieredPrices` or None); a tier starting at N prices requests over N tokens."""
    from genai_prices.types import TieredPrices

    if not isinstance(value, TieredPrices):
        return value
    return next((t.price for t in reversed(value.tiers) if t.start < least), value.base)


def overlay(lower: pl.DataFrame, upper: pl.DataFrame) -> pl.DataFrame:
    """Return `upper`'s rows and those of `lower` dated before the first row `upper` has for their model."""
    taken = upper.group_by("model").agg(taken_from=pl.col("effective_date").min())
    kept = (
        lower.join(taken, on="model", how="left")
        .filter(pl.col("taken_from").is_null() | (pl.col("effective_date") < pl.col("taken_from")))
        .drop("taken_from")
    )
    return pl.concat([kept, upper])


def read_prices(path: Path) -> pl.DataFrame:
    """Return the rows of a price file laid out like data/pricing.csv (a row without a source: the
    file's path); raise BatchError naming the file, the line and the fix when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise BatchError(f"{path}: cannot be read ({reason}). Pass a CSV file laid out like data/pricing.csv.") from exc
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != CSV_COLUMNS:
        raise BatchError(f"{path}:1: the header must be {','.join(CSV_COLUMNS)} (the layout of data/pricing.csv).")
    rows, seen = [], set()
    for row in reader:
        where = f"{path}:{reader.line_num}"
        if None in row or any(v is None for v in row.values()):
            raise BatchError(f"{where}: {len(CSV_COLUMNS)} fields expected, as in the header.")
        model, day = row["model"].strip(), _date(row["effective_date"], where, "effective_date")
        if not model or day is None:
            raise BatchError(f"{where}: model and effective_date are required.")
        if (model, day) in seen:
            raise BatchError(f"{where}: a second row for {model} on {day}; keep one.")
        seen.add((model, day))
        prices = {column: _price(row[column], where, column) for column in PRICE_KEYS}
        if any(prices[column] is None for column in _REQUIRED):
            raise BatchError(f"{where}: {' and '.join(_REQUIRED)} are required.")
        rows.append({
            "model": model, "effective_date": day, "min_input_tokens": 0, **prices,
            "source": row["source"].strip() or str(path), "checked_on": _date(row["checked_on"], where, "checked_on"),
        })
    return pl.DataFrame(rows, schema=SCHEMA)


def _date(text: str, where: str, column: str) -> date | None:
    if not text.strip():
        return None
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise BatchError(f"{where}: {column} {text!r} is not a date; write it as YYYY-MM-DD.") from None


def _price(text: str, where: str, column: str) -> Decimal | None:
    if not text.strip():
        return None
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite() or not 0 <= value < 10**9:  # what the column holds
        raise BatchError(f"{where}: {column} {text!r} is not a price; write USD per million tokens, as 1.25.")
    return value
