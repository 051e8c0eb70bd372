"""Usage and cost per day, month, session or project, over an output's catalog: the library behind
`asr-batch report`, and the totals that end `asr-batch convert`'s summary.

Days are local days of a time zone (the variable `asr_timezone`, which the catalog's day views
read too); the prices in force are still those of the response's UTC day (inference_costs).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb

from batch import sql
from batch.errors import BatchError
from batch.output.catalog import TIMEZONE
from batch.query import Result

PERIODS = ("daily", "monthly", "session", "project")
# the first column's name in each report
_KEYS = {"daily": "day", "monthly": "month", "session": "root_session_key", "project": "project"}
LOCAL = "local"


def use_timezone(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """Make `name` (an IANA time zone, or `local`: this machine's) the zone of local days on `con`;
    return its name as DuckDB spells it."""
    if name == LOCAL:
        name = con.sql("select current_setting('TimeZone')").fetchall()[0][0]
    found = con.execute("select name from pg_timezone_names() where lower(name) = lower($name)", {"name": name}).fetchall()
    if not found:
        raise BatchError(
            f"--timezone {name}: not a time zone DuckDB knows. Use an IANA name such as UTC, Europe/Paris or "
            f"America/New_York, or {LOCAL} for this machine's."
        )
    con.execute(f"set variable {TIMEZONE} = $zone", {"zone": found[0][0]})
    return found[0][0]


def report(
    con: duckdb.DuckDBPyConnection, period: str, *, since: dt.date | None = None, until: dt.date | None = None,
) -> Result:
    """The rows of one report (sql/report/report.sql), oldest period first, on a catalog whose time
    zone is set (`use_timezone`)."""
    if period not in PERIODS:
        raise BatchError(f"{period}: not a report. Use one of {', '.join(PERIODS)}.")
    if since and until and since > until:
        raise BatchError(f"--since {since} is after --until {until}: no day is in between.")
    rel = sql.relation(con, "report", {"period": period, "since": since, "until": until})
    dropped = {"session": (), "project": ("name", "project")}.get(period, ("name", "project", "first_day", "last_day"))
    columns = [c for c in rel.columns if c not in dropped]
    rows = rel.select(*columns).fetchall()
    return Result([_KEYS[period], *columns[1:]], iter(rows), 1, 1, "report")


@dataclass(frozen=True)
class Totals:
    """What an output holds, in an analyst's terms."""

    sessions: int  # main sessions
    subagents: int  # every other stream: subagents, sidechains
    inferences: int
    tokens: int
    cost_usd: float | None  # of the priced inferences
    incomplete: int  # priced inferences whose cost is a lower bound: a usage count missing or a placeholder
    unpriced_models: int
    losses: tuple[tuple[str, int], ...]  # (category, streams), most frequent first


def totals(con: duckdb.DuckDBPyConnection) -> Totals:
    """The totals of the output open on `con`."""
    streams = con.sql(
        "select count(*) filter (where stream_kind = 'main'), count(*) filter (where stream_kind <> 'main') from sessions"
    ).fetchall()[0]
    usage = con.sql(
        "select count(*), coalesce(sum(total_tokens), 0), sum(cost_usd), count(*) filter (where is_priced and "
        "is_cost_lower_bound), count(distinct model) filter (where not is_priced) from inference_costs"
    ).fetchall()[0]
    losses = con.sql("select category, count(*) as n from losses group by category order by n desc, category").fetchall()
    return Totals(
        sessions=streams[0], subagents=streams[1], inferences=usage[0], tokens=int(usage[1]), cost_usd=usage[2],
        incomplete=usage[3], unpriced_models=usage[4], losses=tuple(losses),
    )

    @property
    def is_lower_bound(self) -> bool:
        return self.incomplete > 0 or self.unpriced_models > 0
