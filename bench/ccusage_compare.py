"""Compare our token totals with ccusage's daily and session reports on the same archive.

    npm install --prefix bench/ccusage ccusage@20.0.24
    python bench/ccusage_compare.py --ccusage bench/ccusage/node_modules/.bin/ccusage            # the corpus
    python bench/ccusage_compare.py --ccusage ... --archive bench/archive/2048 --out bench/archive/2048-out

Without --archive, the real corpus (tests/fixtures/corpus) is copied into a temporary
`projects/<project>/<session>.jsonl` layout, the one ccusage reads under $CLAUDE_CONFIG_DIR
(each source repository's folders flattened into project folders, `<sessionId>/subagents/`
kept under its project). The copy is converted with asr-batch, ccusage runs on the same copy
(`claude daily` and `claude session`, --json --offline, UTC days), and the script prints the
totals of both, every (day, model) that differs, and the sessions of each side that the other
does not have or counts differently. Results are the figures of docs/usage-accounting.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from batch.output.catalog import open_catalog  # noqa: E402


def lay_out(corpus: Path, projects: Path) -> None:
    """Copy the corpus as ~/.claude/projects/<project>/...: ccusage's layout."""
    for f in sorted(corpus.rglob("*")):
        if not f.is_file() or f.suffix not in (".jsonl", ".json"):
            continue
        parts = list(f.relative_to(corpus).parts[:-1])
        cut = next((i - 1 for i, p in enumerate(parts) if p == "subagents" and i > 0), len(parts))
        target = projects / "-".join(parts[:cut]) / Path(*parts[cut:], f.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)


def ccusage(binary: str, config: Path, report: str) -> dict:
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config), "HOME": str(config / "home")}
    (config / "home").mkdir(exist_ok=True)
    done = subprocess.run([binary, "claude", report, "--json", "--offline", "-z", "UTC"],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ccusage", required=True, help="the ccusage executable")
    parser.add_argument("--archive", type=Path, help="a projects folder (default: a copy of the corpus)")
    parser.add_argument("--out", type=Path, help="its converted output (default: converted into a temporary folder)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="asr-ccusage-"))
    try:
        config = work / "claude"
        if args.archive is None:
            lay_out(ROOT / "tests" / "fixtures" / "corpus", config / "projects")
        else:
            config.mkdir()
            (config / "projects").symlink_to(args.archive.resolve())
        out = args.out or work / "out"
        if not (out / "manifest.json").is_file():
            subprocess.run([sys.executable, "-m", "batch", "convert", str(config / "projects"), "--out", str(out),
                            "--quiet"], check=True)
        daily, sessions = ccusage(args.ccusage, config, "daily"), ccusage(args.ccusage, config, "session")
        compare(open_catalog(out), daily, sessions)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare(con: duckdb.DuckDBPyConnection, daily: dict, sessions: dict) -> None:
    con.execute("create temp table cc_daily (day date, model varchar, input bigint, output bigint, "
                "cache_write bigint, cache_read bigint, cost double)")
    con.executemany("insert into cc_daily values (?, ?, ?, ?, ?, ?, ?)", [
        (d["date"], m["modelName"], m["inputTokens"], m["outputTokens"], m["cacheCreationTokens"],
         m["cacheReadTokens"], m["cost"])
        for d in daily["daily"] for m in d["modelBreakdowns"]
    ])
    con.execute("create temp table cc_sessions (project varchar, session varchar, tokens bigint, cost double)")
    con.executemany("insert into cc_sessions values (?, ?, ?, ?)", [
        (s["projectPath"], s["sessionId"], s["totalTokens"], s["totalCost"]) for s in sessions["sessions"]
    ])

    def show(title: str, query: str) -> None:
        print(f"\n{title}")
        con.sql(query).show(max_rows=500, max_width=200)

    show("Totals", """
        select 'ccusage daily' as report, count(*) as rows, sum(input) as input, sum(output) as output,
               sum(cache_write) as cache_write, sum(cache_read) as cache_read, round(sum(cost), 4) as cost_usd
        from cc_daily
        union all
        select 'asr-batch inference_costs', count(*), sum(input_uncached_tokens), sum(output_total_tokens),
               sum(cache_write_tokens), sum(cache_read_tokens), round(sum(cost_usd), 4)
        from inference_costs
    """)
    show("(day, model) rows that differ (ours minus ccusage)", """
        with ours as (
            select day, model, sum(input_uncached_tokens) as input, sum(output_total_tokens) as output,
                   sum(cache_write_tokens) as cache_write, sum(cache_read_tokens) as cache_read,
                   sum(cost_usd) as cost
            from inference_costs group by all
        )
        select day, model, o.input - c.input as input, o.output - c.output as output,
               o.cache_write - c.cache_write as cache_write, o.cache_read - c.cache_read as cache_read,
               round(o.cost - c.cost, 4) as cost_usd
        from ours as o full join cc_daily as c using (day, model)
        where o.input is distinct from c.input or o.output is distinct from c.output
           or o.cache_write is distinct from c.cache_write or o.cache_read is distinct from c.cache_read
        order by day, model
    """)
    show("Sessions: ccusage's rows against our main sessions (subagents included)", """
        with ours as (
            select root_session_key as session, count(distinct session_key) as streams,
                   sum(input_uncached_tokens + cache_read_tokens + cache_write_tokens + output_total_tokens) as tokens
            from inference_costs group by 1
        )
        select coalesce(o.session, c.session) as session, o.streams, o.tokens as ours, c.tokens as ccusage,
               o.tokens - c.tokens as difference
        from ours as o full join cc_sessions as c using (session)
        where o.tokens is distinct from c.tokens
        order by o.tokens is null, c.tokens is null, session
    """)
    show("Session report totals", """
        select (select count(*) from cc_sessions) as ccusage_sessions, (select sum(tokens) from cc_sessions) as ccusage_tokens,
               (select count(*) from usage_by_session) as our_sessions,
               (select sum(input_uncached_tokens + cache_read_tokens + cache_write_tokens + output_total_tokens)
                from inference_costs) as our_tokens
    """)


if __name__ == "__main__":
    main()
