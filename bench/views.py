"""Time every view of the catalog on a converted archive, next to the same question asked of the raw JSONL.

    python bench/views.py --archive bench/archive/2048 --out bench/archive/2048-out [--runs 3]
    python bench/views.py --size-mb 256          # generate and convert an archive first

For each view of sql/views/ it prints the best of `--runs` warm runs of `select * from <view>`
fetched as Arrow, through `open_catalog` (the read-only connection of `asr-batch sql`). For the
common questions it also times a DuckDB query over the raw JSONL (`read_ndjson_objects`) that
answers the same question the simplest way a user would: one usage per message.id (its largest
output count), no folding, no copies resolved. The raw queries are not the views' definitions;
they are what a view saves its user from writing and waiting for. The figures are also written
to bench/results/views-<name>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from batch.output.catalog import open_catalog, refresh_catalog, view_files  # noqa: E402

TARGET_SECONDS = 0.5
TARGET_SPEEDUP = 20.0

# The raw-JSONL version of each common question. {glob} is the archive's JSONL files.
_LINES = "select json as j from read_ndjson_objects({glob}, ignore_errors = true)"
_USAGE = f"""
    with lines as ({_LINES}),
    responses as (
        select
            j->>'$.message.id' as id,
            any_value(j->>'$.sessionId') as session_id,
            any_value(j->>'$.message.model') as model,
            min(cast(j->>'$.timestamp' as timestamptz)) as responded_at,
            max(cast(j->>'$.message.usage.input_tokens' as bigint)) as input,
            max(cast(j->>'$.message.usage.cache_read_input_tokens' as bigint)) as cache_read,
            max(cast(j->>'$.message.usage.cache_creation_input_tokens' as bigint)) as cache_write,
            max(cast(j->>'$.message.usage.output_tokens' as bigint)) as output,
            bool_or(j->>'$.isSidechain' = 'true') as sidechain,
            any_value(j->>'$.cwd') as cwd,
        from lines
        where j->>'$.type' = 'assistant' and j->>'$.message.id' is not null
        group by 1
    )
"""
RAW = {
    "usage_by_day": _USAGE + """
        select cast(timezone('UTC', responded_at) as date) as day, model, count(*), sum(input), sum(cache_read),
               sum(cache_write), sum(output)
        from responses group by all""",
    "usage_by_session": _USAGE + """
        select session_id, count(*), sum(input + cache_read + cache_write + output), min(responded_at), max(responded_at)
        from responses group by all""",
    "usage_by_project": _USAGE + """
        select cwd, count(distinct session_id), count(*), sum(input + cache_read + cache_write + output)
        from responses group by all""",
    "cache_hit_ratio": _USAGE + """
        select cast(timezone('UTC', responded_at) as date) as day, model,
               sum(cache_read) / nullif(sum(input + cache_read + cache_write), 0)
        from responses group by all""",
    "subagent_share": _USAGE + """
        select session_id, sum(input + cache_read + cache_write + output) filter (where sidechain)
               / nullif(sum(input + cache_read + cache_write + output), 0)
        from responses group by all""",
    "tool_rates": f"""
        with lines as ({_LINES}),
        blocks as (
            select j->>'$.type' as type, unnest(cast(j->'$.message.content' as json[])) as b
            from lines
            where j->>'$.type' in ('assistant', 'user') and json_type(j->'$.message.content') = 'ARRAY'
        ),
        calls as (select b->>'$.id' as id, any_value(b->>'$.name') as name from blocks
                  where b->>'$.type' = 'tool_use' group by 1),
        results as (select b->>'$.tool_use_id' as id, bool_or(b->>'$.is_error' = 'true') as is_error from blocks
                    where b->>'$.type' = 'tool_result' group by 1)
        select c.name, count(*), count(*) filter (where r.is_error), count(*) filter (where r.id is null)
        from calls as c left join results as r using (id) group by all""",
    "compactions_per_session": f"""
        with lines as ({_LINES})
        select j->>'$.sessionId', count(*) filter (where j->>'$.subtype' = 'compact_boundary'),
               count(*) filter (where j->>'$.subtype' = 'microcompact_boundary')
        from lines group by all""",
    "session_stats": f"""
        with lines as ({_LINES})
        select j->>'$.sessionId', count(*), min(cast(j->>'$.timestamp' as timestamptz)),
               max(cast(j->>'$.timestamp' as timestamptz)),
               count(*) filter (where j->>'$.type' = 'user' and json_type(j->'$.message.content') = 'VARCHAR')
        from lines group by all""",
    "hook_failures": f"""
        with lines as ({_LINES})
        select j->>'$.attachment.hookEvent', j->>'$.attachment.command', count(*),
               count(*) filter (where j->>'$.attachment.type' in ('hook_non_blocking_error', 'hook_error_during_execution', 'hook_cancelled'))
        from lines where j->>'$.type' = 'attachment' and j->>'$.attachment.type' like 'hook%' group by all""",
}


def best(run, runs: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        rows = run()
        times.append(time.perf_counter() - t)
    return min(times), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", type=Path, help="the raw archive (Claude Code projects folder)")
    parser.add_argument("--out", type=Path, help="its converted output (default: convert it into <archive>-out)")
    parser.add_argument("--size-mb", type=int, help="generate an archive of this size with bench/generate.py first")
    parser.add_argument("--runs", type=int, default=3, help="warm runs per view; the best is kept (raw: 2)")
    parser.add_argument("--no-raw", action="store_true", help="time the views only")
    args = parser.parse_args()

    if args.archive is None:
        if args.size_mb is None:
            parser.error("pass --archive (and --out), or --size-mb to generate one")
        args.archive = ROOT / "bench" / "archive" / str(args.size_mb)
        if not args.archive.is_dir():
            subprocess.run([sys.executable, str(ROOT / "bench" / "generate.py"), "--size-mb", str(args.size_mb),
                            "--out", str(args.archive), "--seed", "0"], check=True)
    out = args.out or args.archive.with_name(args.archive.name + "-out")
    if not (out / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "batch", "convert", str(args.archive), "--out", str(out), "--quiet"],
                       check=True)
    refresh_catalog(out)  # views of this checkout, whatever converted the output

    machine = {"cpus": os.cpu_count(), "platform": platform.platform(),
               "load_before": os.getloadavg(), "duckdb": duckdb.__version__}
    manifest = json.loads((out / "manifest.json").read_text())
    input_mib = sum(i["size"] for i in manifest["inputs"]) / (1 << 20)
    print(f"archive {args.archive} ({input_mib:.0f} MiB), output {out}")
    print(f"{machine['cpus']} CPUs, load {machine['load_before'][0]:.2f} before, duckdb {machine['duckdb']}")

    con = open_catalog(out)
    glob = "'" + str(args.archive / "**" / "*.jsonl").replace("'", "''") + "'"
    raw = duckdb.connect()
    raw.execute("set enable_progress_bar = false")
    results = []
    print(f"\n{'view':<26}{'rows':>10}{'view s':>10}{'raw s':>10}{'speed-up':>10}")
    for name in view_files():
        seconds, rows = best(lambda: con.execute(f"select * from {name}").to_arrow_table().num_rows, args.runs)
        raw_seconds = None
        if name in RAW and not args.no_raw:
            query = RAW[name].format(glob=glob)
            raw_seconds, _ = best(lambda: len(raw.execute(query).fetchall()), max(1, min(args.runs, 2)))
        speedup = raw_seconds / seconds if raw_seconds else None
        results.append({"view": name, "rows": rows, "seconds": seconds, "raw_seconds": raw_seconds, "speedup": speedup})
        print(f"{name:<26}{rows:>10}{seconds:>10.3f}"
              + (f"{raw_seconds:>10.2f}{speedup:>9.0f}x" if raw_seconds else f"{'—':>10}{'—':>10}"))
    machine["load_after"] = os.getloadavg()
    slow = [r["view"] for r in results if r["seconds"] >= TARGET_SECONDS]
    short = [r["view"] for r in results if r["speedup"] is not None and r["speedup"] < TARGET_SPEEDUP]
    print(f"\nload {machine['load_after'][0]:.2f} after")
    print(f"every view under {TARGET_SECONDS} s: {'yes' if not slow else 'no: ' + ', '.join(slow)}")
    if not args.no_raw:
        print(f"common questions at least {TARGET_SPEEDUP:.0f}x faster than the raw JSONL: "
              + ("yes" if not short else "no: " + ", ".join(short)))
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"views-{args.archive.name}.json").write_text(
        json.dumps({"archive": str(args.archive), "input_mib": input_mib, "machine": machine, "views": results},
                   indent=2) + "\n")


if __name__ == "__main__":
    main()
