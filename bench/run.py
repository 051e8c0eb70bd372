"""Benchmark `asr-batch convert` against a DuckDB scan of the same JSONL.

    python bench/run.py [--size-mb 2048] [--archive DIR] [--seed 0] [--keep] [--batch-mb N] [--workers N] [--floor]
                        [--session-mb MIB] [--long-line-mb MIB] [--executors NAMES] [--codex-mb MIB] [--baseline REF]

Generates a synthetic archive with bench/generate.py (or reuses one generated before with the
same size and seed; `--archive` may also name any existing Claude Code projects folder), then
prints in one run: input MiB, files and lines; the warm time of
`select count(*) from read_ndjson_objects('<archive>/**/*.jsonl', ignore_errors=true)`; the time
of `asr-batch convert ARCHIVE --out OUT --quiet` run as a subprocess; their ratio; MiB/s; and the
peak RSS of the convert process alone (measured by a small wrapper process, so the DuckDB scan
of this process does not count). With --floor it also times the least work of any converter that
hashes its inputs and keeps every line's JSON (see `floor`) and the convert's ratio to it, in wall
and CPU seconds, and the writing of the convert's own output once more (see `output_writes`).
Then incremental re-runs over the output (`rerun`): with nothing changed; with 1% of the sessions
grown by one line (every 100th main transcript by path; as Claude Code appends to a live
transcript); then with the 1% of the main transcripts modified last grown the same way; each as a
share of the full convert. With --session-mb, one session of that size built from the archive
(bench/session.py), converted alone, with its peak RSS. With --long-line-mb, a session with one
tool-result line of that size and the same session with a short line, their peaks and the long
line's cost per byte (`long_line`). With --codex-mb, a Codex archive (bench/codex.py) and a Claude
Code archive of that size converted alternately: each converter's MiB per CPU second and their
ratio (`codex_speed`). With --baseline, another commit of this repository installed in a virtual
environment of its own (bench/baseline.py) and the checkout converted alternately, their wall, CPU
and peak, the ratios and whether both outputs hold the same rows (`against_baseline`). The figures
are also written to bench/results/.

Without --keep, the converted output is deleted at the end, and so is the archive if this run
generated it. An archive given with --archive that existed before is never deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline as baseline_ref  # noqa: E402
import codex  # noqa: E402
import generate  # noqa: E402
from grow import grow_sessions, main_transcripts  # noqa: E402
import session  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RSS_TARGET_MIB = 1024
SESSION_RSS_TARGET_MIB = 2048  # one session of 1 GiB, subagents included

# Runs the converter as its child and reports the child's wall time and peak RSS (KiB on Linux):
# RUSAGE_CHILDREN of this wrapper covers the converter and the processes it started and waited for
# (Dask's workers), its peak that of the largest one. The sum of their RSS is sampled every 0.2 s.
WRAPPER = r"""
import json, os, resource, subprocess, sys, threading, time

def tree_rss(root):
    parents = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, grew = {root}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total

t = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=sys.stderr)
peak = [0]
def sample():
    while proc.poll() is None:
        peak[0] = max(peak[0], tree_rss(proc.pid))
        time.sleep(0.2)
threading.Thread(target=sample, daemon=True).start()
rc = proc.wait()
seconds = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "seconds": seconds, "cpu_seconds": ru.ru_utime + ru.ru_stime,
                  "system_cpu_seconds": ru.ru_stime, "maxrss_kib": ru.ru_maxrss, "tree_rss_bytes": peak[0]}))
"""


def converter_command() -> list[str]:
    script = Path(sys.executable).with_name("asr-batch")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "batch"]


def archive_stats(archive: Path) -> dict:
    """Count bytes, files and lines of every .jsonl below the archive (also warms the page cache)."""
    files = size = lines = 0
    for path in sorted(archive.rglob("*.jsonl")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        files += 1
        size += len(data)
        lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return {"files": files, "bytes": size, "mib": size / (1 << 20), "lines": lines}


def duckdb_scan(archive: Path, runs: int = 2) -> dict:
    glob = str(archive / "**" / "*.jsonl").replace("'", "''")
    query = f"select count(*) from read_ndjson_objects('{glob}', ignore_errors=true)"
    times, cpu = [], []
    count = None
    with duckdb.connect() as con:
        con.execute("set enable_progress_bar = false")
        for _ in range(runs):
            r = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            count = con.sql(query).fetchall()[0][0]
            times.append(time.perf_counter() - t)
            r2 = resource.getrusage(resource.RUSAGE_SELF)
            cpu.append(r2.ru_utime + r2.ru_stime - r.ru_utime - r.ru_stime)
    return {"seconds": times[-1], "cpu_seconds": cpu[-1], "first_seconds": times[0], "objects": count, "query": query}


def floor(archive: Path, scratch: Path) -> dict:
    """Time the least work of a converter that hashes its inputs and keeps every line's JSON.

    Three parts, each timed alone: the sha256 of every input file (the manifest's inputs); one
    JSON parse of every line, extracting the envelope fields (DuckDB, all CPUs); and one zstd
    Parquet copy of every line's text (pyarrow, as the converter writes; the lines are read
    into memory per group of files beforehand, untimed). Their CPU seconds divided by the number
    of CPUs bound from below the wall time of any converter doing at least this, on this machine.
    Everything else the converter does (ordering, folding, parts, usage selection, the other
    tables) comes on top.
    """
    import hashlib

    import pyarrow.parquet as pq

    files = sorted(p for p in archive.rglob("*.jsonl") if p.is_file())
    result: dict = {}

    start = time.thread_time()
    for path in files:
        with path.open("rb") as fh:
            hashlib.file_digest(fh, "sha256")
    result["sha256_cpu_seconds"] = time.thread_time() - start

    glob = str(archive / "**" / "*.jsonl").replace("'", "''")
    envelope = (
        "json_extract_string(json, ['$.type', '$.uuid', '$.parentUuid', '$.sessionId', '$.timestamp', "
        "'$.message.id', '$.message.role', '$.isSidechain'])"
    )
    parse = (
        f"select count(e[1]), count(e[8]) from (select {envelope} as e "
        f"from read_ndjson_objects('{glob}', ignore_errors=true))"
    )
    with duckdb.connect() as con:
        con.execute("set enable_progress_bar = false")
        r = resource.getrusage(resource.RUSAGE_SELF)
        t = time.perf_counter()
        con.execute(parse).fetchall()
        result["parse_seconds"] = time.perf_counter() - t
        r2 = resource.getrusage(resource.RUSAGE_SELF)
        result["parse_cpu_seconds"] = r2.ru_utime + r2.ru_stime - r.ru_utime - r.ru_stime

        scratch.mkdir(parents=True, exist_ok=True)
        target = scratch / "floor.parquet"
        group: list[str] = []
        size = written = 0
        write_cpu = 0.0

        def write(paths: list[str]) -> float:
            lines = con.sql(
                "select json::varchar as json from read_ndjson_objects(?, ignore_errors=true)", params=[paths]
            ).to_arrow_table()
            start = time.thread_time()
            pq.write_table(lines, target, compression="zstd")
            return time.thread_time() - start

        for path in files:
            group.append(str(path))
            size += path.stat().st_size
            if size >= 64 << 20:
                write_cpu += write(group)
                written += target.stat().st_size
                group, size = [], 0
        if group:
            write_cpu += write(group)
            written += target.stat().st_size
        target.unlink(missing_ok=True)
        scratch.rmdir()
    result["write_cpu_seconds"] = write_cpu
    result["parquet_mib"] = written / (1 << 20)
    result["cpus"] = os.cpu_count() or 1
    result["cpu_seconds"] = result["sha256_cpu_seconds"] + result["parse_cpu_seconds"] + write_cpu
    result["seconds"] = result["cpu_seconds"] / result["cpus"]
    return result


def output_writes(out: Path, scratch: Path) -> dict:
    """CPU seconds of writing the convert's own output once more: every row group of every
    table's Parquet files (its `_work` tables apart), read untimed and written with zstd as the
    converter writes, timed alone.

    With the floor's sha256 and parse, this bounds from below any converter that writes this
    output, whatever it does in between: the output holds `records.native`, the floor's copy of
    every line, and beside it the typed projections of `parts` and the other tables.
    """
    import pyarrow.parquet as pq

    scratch.mkdir(parents=True, exist_ok=True)
    target = scratch / "output.parquet"
    tables: dict[str, float] = {}
    for folder in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("_")):
        spent = 0.0
        for path in sorted(folder.glob("*.parquet")):
            source = pq.ParquetFile(path)
            with pq.ParquetWriter(target, source.schema_arrow, compression="zstd") as writer:
                for group in range(source.num_row_groups):
                    rows = source.read_row_group(group)
                    start = time.thread_time()
                    writer.write_table(rows)
                    spent += time.thread_time() - start
        tables[folder.name] = spent
    target.unlink(missing_ok=True)
    scratch.rmdir()
    return {"cpu_seconds": sum(tables.values()), "tables": tables}


def busy_cpu_seconds() -> float | None:
    """Non-idle CPU time of the whole machine so far (Linux /proc/stat), in seconds."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def wait_idle(limit: float) -> None:
    """Wait up to `limit` seconds until the machine is idle: under 0.1 CPU busy over 3 seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = busy_cpu_seconds()
        if before is None:
            return
        time.sleep(3)
        if (busy_cpu_seconds() - before) / 3 < 0.1:
            return
    print("note      the machine did not become idle; timing anyway", file=sys.stderr)


def convert(
    archive: Path, out: Path, batch_mb: int | None, workers: int | None, *, full: bool = True, executor: str | None = None,
    command: list[str] | None = None, env: dict[str, str] | None = None,
) -> dict:
    cmd = [*(command or converter_command()), "convert", str(archive), "--out", str(out), "--quiet", *(["--full"] if full else [])]
    if executor:
        cmd += ["--executor", executor]
    if batch_mb:
        cmd += ["--batch-mb", str(batch_mb)]
    if workers:
        cmd += ["--workers", str(workers)]
    busy_before = busy_cpu_seconds()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], stdout=subprocess.PIPE, text=True, check=False, env=env)
    busy_after = busy_cpu_seconds()
    if proc.returncode != 0:
        raise SystemExit(f"wrapper failed with exit code {proc.returncode}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if report["rc"] != 0:
        raise SystemExit(f"convert failed with exit code {report['rc']}: {' '.join(cmd)}")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return {
        "seconds": report["seconds"],
        "cpu_seconds": report["cpu_seconds"],
        # of which in the kernel: page faults and new file pages, whose cost depends on the machine
        # (docs/performance.md, "What the CPU seconds are spent on")
        "system_cpu_seconds": report["system_cpu_seconds"],
        # CPU time that processes other than the convert used while it ran (all CPUs of the machine).
        "other_cpu_seconds": (
            max(0.0, busy_after - busy_before - report["cpu_seconds"]) if busy_before is not None else None
        ),
        "peak_rss_mib": report["maxrss_kib"] / 1024,
        # the most the converter and its processes held at once, sampled (Dask's workers beside the driver)
        "sampled_total_rss_mib": report["tree_rss_bytes"] / (1 << 20),
        "command": " ".join(cmd),
        "tables": manifest["tables"],
        "rejected_lines": manifest["rejected_lines"],
        "foreign_files": manifest["foreign_files"],
        "reuse": manifest.get("reuse"),
    }


RERUN_SHARE = 0.01
RERUN_TARGETS = {"nothing changed": 0.05, "1% of sessions grown": 0.10}
# A second growth scenario, reported beside the first (same target): the 1% of main transcripts
# modified last before the run grow, as live sessions do.
RECENT_LABEL = "1% most recently modified sessions grown"


def executor_runs(archive: Path, out: Path, args: argparse.Namespace) -> dict:
    """Convert the archive with each of `args.executors` in turn, twice over (a, b, a, b), and print
    each one's fastest run; CPU seconds and peak are those of the converter and every process it
    started (Dask's workers), the peak that of the largest one."""
    names = [n.strip() for n in args.executors.split(",") if n.strip()]
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(2):
        for name in names:
            if args.wait_idle:
                wait_idle(args.wait_idle)
            runs[name].append(convert(archive, out, args.batch_mb, args.workers, executor=name))
    best = {name: min(rs, key=lambda r: r["seconds"]) for name, rs in runs.items()}
    tables = {name: r["tables"] for name, r in best.items()}
    same = all(t == tables[names[0]] for t in tables.values())
    for name, r in best.items():
        each = ", ".join(f"{x['seconds']:.1f}" for x in runs[name])
        print(f"executor  {name}: {r['seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s CPU "
              f"({r['system_cpu_seconds']:.2f} in the kernel), largest process {r['peak_rss_mib']:.0f} MiB, all "
              f"processes at once {r['sampled_total_rss_mib']:.0f} MiB (sampled) "
              f"(runs: {each} s)")
    print(f"          row counts of every table {'the same' if same else 'DIFFERENT'} across executors")
    return {name: {**r, "all_seconds": [x["seconds"] for x in runs[name]]} for name, r in best.items()}


def codex_speed(scratch: Path, size_mb: float, args: argparse.Namespace) -> dict:
    """A Codex archive (bench/codex.py) and a Claude Code archive (bench/generate.py) of the same size,
    each converted twice, alternated (Claude Code, Codex, Claude Code, Codex): MiB per CPU second of
    the fastest run of each and their ratio (the Codex converter's target: the same as Claude Code's)."""
    archives = {"claude-code": scratch / f"claude-{size_mb:g}", "codex": scratch / f"codex-{size_mb:g}"}
    shutil.rmtree(scratch, ignore_errors=True)
    generate.generate(size_mb, archives["claude-code"], args.seed, invalid_lines=True, verbose=False)
    codex.generate(size_mb, archives["codex"], args.seed)
    runs: dict[str, list[dict]] = {name: [] for name in archives}
    try:
        for _ in range(2):
            for name, archive in archives.items():
                if args.wait_idle:
                    wait_idle(args.wait_idle)
                runs[name].append(convert(archive, scratch / f"out-{name}", args.batch_mb, args.workers))
        result = {}
        for name, archive in archives.items():
            best = min(runs[name], key=lambda r: r["cpu_seconds"])
            mib = archive_stats(archive)["mib"]
            each = ", ".join(f"{r['cpu_seconds']:.1f}" for r in runs[name])
            result[name] = {**best, "mib": mib, "mib_per_cpu_second": mib / best["cpu_seconds"]}
            print(f"agent     {name}: {mib:.0f} MiB in {best['seconds']:.2f} s wall, {best['cpu_seconds']:.2f} s CPU "
                  f"= {result[name]['mib_per_cpu_second']:.2f} MiB per CPU second, peak {best['peak_rss_mib']:.0f} "
                  f"MiB (runs: {each} s CPU)")
        ratio = result["codex"]["mib_per_cpu_second"] / result["claude-code"]["mib_per_cpu_second"]
        print(f"          Codex / Claude Code in MiB per CPU second = {ratio:.2f} (target >= 1: "
              f"{'met' if ratio >= 1 else 'NOT met'})")
        return {**result, "ratio": ratio}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def against_baseline(archive: Path, scratch: Path, args: argparse.Namespace) -> dict:
    """Convert the archive with commit `args.baseline` (bench/baseline.py) and with the checkout, alternated
    (baseline, checkout, baseline, checkout; `--repeat` pairs when more than two), each into its own output;
    print both converters' figures, the ratios against the targets and whether both outputs hold the same rows."""
    ref = baseline_ref.build(args.baseline)
    outs = {"baseline": scratch / "baseline", "new": scratch / "new"}
    shutil.rmtree(scratch, ignore_errors=True)
    runs: dict[str, list[dict]] = {name: [] for name in outs}
    try:
        for name in baseline_ref.order(max(2, args.repeat)):
            if args.wait_idle:
                wait_idle(args.wait_idle)
            shutil.rmtree(outs[name], ignore_errors=True)
            kw = {"command": ref.command, "env": ref.env} if name == "baseline" else {}
            runs[name].append(convert(archive, outs[name], args.batch_mb, args.workers, **kw))
        base, new = baseline_ref.best(runs["baseline"]), baseline_ref.best(runs["new"])
        same, differ = baseline_ref.compare(outs["baseline"], outs["new"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    label = f"baseline {ref.commit[:7]}"
    print(f"baseline  {ref.commit[:7]} (bench/baseline/{ref.commit}) and the checkout, alternated "
          f"{len(runs['new'])} times:")
    for line in baseline_ref.report(label, base, new):
        print(line)
    excluded = ", ".join(baseline_ref.EXCLUDE)
    print(f"          outputs (bench/compare.py, without {excluded}): "
          + ("identical" if same else f"DIFFERENT in {len(differ)} tables"))
    for line in differ:
        print(f"            {line}")
    return {"commit": ref.commit, "baseline": base, "new": new, "ratios": baseline_ref.ratios(base, new),
            "target": baseline_ref.TARGET, "identical": same, "differences": differ, "excluded": list(baseline_ref.EXCLUDE)}


UPGRADE_GONE_SHARE = 0.1  # of the session groups, whose files are removed before the upgrade (kept by REF)


def per_archive(script: str, sizes: str, label: str) -> list[str]:
    """bench/<script>'s line for the archive of each size (MiB), each run in a process of its own so
    that each peak is its own (the final stage alone: finalize.py; the driver's steps: driver.py)."""
    lines = []
    for size in (float(s) for s in sizes.split(",") if s.strip()):
        archive = ROOT / "bench" / "archive" / f"{size:g}"
        stamp = generate.stamp_path(archive)
        if not (archive.is_dir() and stamp.is_file() and json.loads(stamp.read_text()).get("size_mb") == size):
            generate.generate(size, archive, 0, invalid_lines=True, verbose=False)
        done = subprocess.run([sys.executable, str(ROOT / "bench" / script), str(archive)],
                              capture_output=True, text=True, check=True)
        lines.append(done.stdout.strip())
        print(f"{label:9s} {lines[-1]}")
    return lines


def folder_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / (1 << 20)


def upgrade(archive: Path, scratch: Path, full_out: Path, full: dict, args: argparse.Namespace) -> dict:
    """An upgrade as a user meets it: commit `args.upgrade_from` converts the archive, a tenth of its session
    groups' files are removed (a retention cleanup), REF converts again (keeping them), then the checkout
    converts over REF's output: the present groups from their files, the kept ones from the output's copy.
    Its figures against `full` (the checkout's full conversion of the same files into `full_out`), whether
    both outputs hold the same rows, and the size of REF's output and of the upgraded one."""
    ref = baseline_ref.build(args.upgrade_from)
    copy = scratch / archive.name  # the same folder name: tables name files by it
    old = scratch / "out"
    shutil.rmtree(scratch, ignore_errors=True)
    copy.parent.mkdir(parents=True)
    shutil.copytree(archive, copy, copy_function=os.link)
    try:
        convert(copy, old, args.batch_mb, args.workers, command=ref.command, env=ref.env)
        # every file of a tenth of the session groups, as REF's state names them (main, subagents, copies)
        groups = {o: fp for b in json.loads((old / "_reuse.json").read_text())["batches"] for o, fp in b["groups"].items()}
        gone = sorted(groups)[:: round(1 / UPGRADE_GONE_SHARE)]
        for owner in gone:
            for name, *_ in groups[owner]:
                (copy.parent / name).unlink(missing_ok=True)
        convert(copy, old, args.batch_mb, args.workers, full=False, command=ref.command, env=ref.env)
        before = folder_mib(old)
        if args.wait_idle:
            wait_idle(args.wait_idle)
        run = convert(copy, old, args.batch_mb, args.workers, full=False)
        manifest = json.loads((old / "manifest.json").read_text(encoding="utf-8"))
        carried = sum(len(f["session_groups"]) for f in manifest.get("carried", {}).get("from", []))
        same, differ = baseline_ref.compare(full_out, old, exclude=("sessions.source_present",))
        after = folder_mib(old)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"upgrade   of an output of {ref.commit[:7]} ({len(gone)} of {len(groups)} session groups' "
          f"files gone, {carried} carried from its copy): {run['seconds']:.2f} s wall, {run['cpu_seconds']:.2f} s CPU, "
          f"peak {run['peak_rss_mib']:.0f} MiB = {run['seconds'] / full['seconds']:.2f} of the full convert in wall, "
          f"{run['cpu_seconds'] / full['cpu_seconds']:.2f} in CPU")
    print(f"          output {before:.0f} MiB as {ref.commit[:7]} wrote it, {after:.0f} MiB upgraded; against the full "
          "convert: " + ("identical" if same else f"DIFFERENT in {len(differ)} tables"))
    for line in differ:
        print(f"            {line}")
    return {"commit": ref.commit, "gone": len(gone), "carried": carried, "run": run, "mib_before": before,
            "mib_after": after, "identical": same, "differences": differ}


def rerun(archive: Path, out: Path, batch_mb: int | None, workers: int | None, full: dict) -> list[dict]:
    """Time the incremental re-runs over `out` (converted from `archive`): nothing changed, then 1% grown
    (every 100th main transcript by path), then the 1% of main transcripts modified last grown.

    They read a hard-linked copy of the archive under the same folder name, so the files keep their
    names, sizes and modification times; the grown files are copies."""
    copy = out.parent / f"{out.name}-rerun-input" / archive.name  # beside the output, named after it
    shutil.rmtree(copy.parent, ignore_errors=True)
    shutil.copytree(archive, copy, copy_function=os.link)
    # the newest main transcripts of the archive as given (before the first scenario grew any)
    mains = main_transcripts(archive)
    count = max(1, round(len(mains) * RERUN_SHARE))
    recent = sorted(mains, key=lambda p: (p.stat().st_mtime_ns, p))[-count:]
    results = []
    try:
        for label in [*RERUN_TARGETS, RECENT_LABEL]:
            if label == RECENT_LABEL:
                grown = grow_sessions(copy, RERUN_SHARE, [copy / p.relative_to(archive) for p in recent])
            else:
                grown = grow_sessions(copy, RERUN_SHARE) if label != "nothing changed" else 0
            run = convert(copy, out, batch_mb, workers, full=False)
            run.update(label=label, grown=grown, share=run["seconds"] / full["seconds"],
                       cpu_share=run["cpu_seconds"] / full["cpu_seconds"])
            results.append(run)
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    return results


def large_session(archive: Path, out: Path, size_mb: float, args: argparse.Namespace) -> dict:
    """Convert one session of size_mb (subagents included) built from the archive; print its figures.
    Skipped, with a line saying so, when the converter's own estimate of its peak exceeds the memory
    available: an out-of-memory kill would take the machine's other work down with it."""
    from batch.run.memory import available_memory, large_session_memory

    need, available = large_session_memory(int(size_mb * (1 << 20))), available_memory()
    if available is not None and need > available:
        print(f"session   one session of {size_mb:g} MiB: skipped, it needs about {need >> 20:,} MiB "
              f"(batch/run/memory.py large_session_memory) and {available >> 20:,} MiB are available")
        return {"mib": size_mb, "skipped": "not enough memory", "needed_mib": need >> 20,
                "available_mib": available >> 20}
    source = ROOT / "bench" / "archive" / f"session-{size_mb:g}-from-{archive.name}"
    built = session.build(archive, size_mb, source)
    if args.wait_idle:
        wait_idle(args.wait_idle)
    try:
        run = convert(source, out, args.batch_mb, args.workers)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(source, ignore_errors=True)
    rss = run["peak_rss_mib"]
    verdict = ("met" if rss < SESSION_RSS_TARGET_MIB else "NOT met") if size_mb >= 1024 else "not checked below 1 GiB"
    print(f"session   one session of {built['mib']:.0f} MiB ({built['main_files']} main files joined, "
          f"{built['subagent_files']} subagents): {run['seconds']:.2f} s wall, {run['cpu_seconds']:.2f} s CPU "
          f"({run['system_cpu_seconds']:.2f} in the kernel), "
          f"peak RSS {rss:.0f} MiB = {rss / built['mib']:.1f} x its size "
          f"(target < {SESSION_RSS_TARGET_MIB} MiB for 1 GiB: {verdict})")
    return {**built, **run}


def long_line(scratch: Path, size_mb: float) -> dict:
    """Convert a session whose one tool-result line is about size_mb MiB (its text in one JSON string,
    as Claude Code writes a file read back), and the same session with that line 1 KiB long, in the
    same run: the difference of their peaks is what the long line costs; print both."""
    runs = {}
    for label, mb in (("short", 1 / 1024), ("long", size_mb)):
        source = scratch / f"long-line-{label}" / "-bench"
        shutil.rmtree(source.parent, ignore_errors=True)
        source.mkdir(parents=True)
        sid = "44444444-4444-4444-8444-444444444444"
        text = ("0123456789abcdef" * 64 + "\n") * max(1, int(mb * (1 << 20)) // 1025)
        stamp = {"sessionId": sid, "timestamp": "2026-02-12T20:30:00.000Z", "cwd": "/srv/app", "version": "2.1.100"}
        lines = [
            {"type": "user", "uuid": "u1", "parentUuid": None, **stamp, "message": {"role": "user", "content": "read it"}},
            {"type": "assistant", "uuid": "u2", "parentUuid": "u1", **stamp, "message": {
                "id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/srv/app/log"}}],
                "usage": {"input_tokens": 6, "output_tokens": 3}}},
            {"type": "user", "uuid": "u3", "parentUuid": "u2", **stamp, "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": text}]}},
        ]
        (source / f"{sid}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        out = scratch / f"long-line-{label}-out"
        try:
            runs[label] = {**convert(source.parent, out, None, None), "line_bytes": len(json.dumps(lines[2]))}
        finally:
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(source.parent, ignore_errors=True)
    long, short = runs["long"], runs["short"]
    cost = (long["peak_rss_mib"] - short["peak_rss_mib"]) / (long["line_bytes"] / (1 << 20))
    print(f"long line one tool-result line of {long['line_bytes'] / (1 << 20):.0f} MiB: {long['seconds']:.2f} s wall, "
          f"{long['cpu_seconds']:.2f} s CPU, peak RSS {long['peak_rss_mib']:.0f} MiB; the same session with a "
          f"1 KiB line {short['peak_rss_mib']:.0f} MiB: the line costs {cost:.1f} x its size")
    return {"long": long, "short": short, "cost_per_byte": cost}


def code_version() -> str:
    """Which converter code runs: the commit of the checkout (+dirty when batch/ or sql/ differ from
    it), or the folder `batch` is imported from when that is not this checkout (PYTHONPATH)."""
    try:
        where = subprocess.run([sys.executable, "-c", "import batch; print(batch.__file__)"], cwd="/", capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    code_root = Path(where).resolve().parent.parent
    if code_root != ROOT:
        return f"the package in {code_root}"
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "batch", "sql"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


# Step profiler, run in a child process: times every SQL file (batch.sql.frame / materialize),
# every Parquet write, every helper function of batch.pipeline and the steps of the Claude Code
# converter and of the line reader, with the peak RSS of each step
# (Linux: VmHWM, reset before each step through /proc/self/clear_refs).
PROFILER = r"""
import collections, inspect, sys, time
from pathlib import Path
sys.path.append(sys.argv[4])  # bench/, for rss.py, after the package and its dependencies
import batch.pipeline as P, batch.sql as S, batch.output.folder as W, batch.output.parts as B
import batch.run.finish as FIN, batch.run.schedule as SCH
import batch.formats.lines as L
from batch.formats.claude_code import converter, streams
import rss

def reset_peak():
    try:
        rss.reset_peak()
    except OSError:
        pass

stats = collections.OrderedDict()
depth = [0]

def timed(label_of, fn):
    def inner(*args, **kwargs):
        label = "  " * depth[0] + label_of(*args, **kwargs)
        depth[0] += 1
        before = rss.status("VmRSS")
        reset_peak()
        started = time.perf_counter()
        cpu_started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            depth[0] -= 1
            peak = rss.status("VmHWM")
            row = stats.setdefault(label, [0, 0.0, 0.0, 0.0, 0.0])
            row[0] += 1
            row[1] += seconds
            row[2] = max(row[2], peak)
            row[3] = max(row[3], peak - before)
            row[4] += cpu
    return inner

S.frame = timed(lambda con, name, *a, **k: f"sql/{name}.sql", S.frame)
S.materialize = timed(lambda con, name, *a, **k: f"sql/{name}.sql (temp table)", S.materialize)
W.Output.write = timed(lambda self, table, *a, **k: f"write {table.name}", W.Output.write)
W.Output.write_work = timed(lambda self, name, *a, **k: f"write _work/{name}", W.Output.write_work)
B.BatchFiles.write_work = timed(lambda self, name, *a, **k: f"write _work/{name}", B.BatchFiles.write_work)
W.Output.commit = timed(lambda self, *a, **k: "commit", W.Output.commit)
B.PartWriter.append = timed(lambda self, *a, **k: f"write part of {self.table.name}", B.PartWriter.append)
# the functions the pipeline, the Claude Code converter's modules and the line reader call (named by
# their module), but not the sha256, which runs on a thread of its own beside the other steps
for module in (P, SCH, FIN, converter, streams, L):
    for name, fn in list(vars(module).items()):
        if inspect.isfunction(fn) and fn.__module__.startswith("batch.") and (module, name) not in ((P, "convert"), (L, "_hash_slice")):
            label = f"{fn.__module__.removeprefix('batch.')}.{fn.__name__}()"
            setattr(module, name, timed(lambda *a, label=label, **k: label, fn))

archive, out, batch_mb = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
kwargs = {"batch_bytes": batch_mb << 20} if batch_mb else {}
# one batch at a time, so that the steps' times add up to the total
kwargs["workers"] = 1
started = time.perf_counter()
cpu_started = time.process_time()
P.convert([archive], out, **kwargs)
total = time.perf_counter() - started
cpu_total = time.process_time() - cpu_started
# CPU seconds of the whole process (all threads) during the step: one batch at a time, so they are
# the step's own; on a shared machine they move less than the wall seconds
print(f"{'step (calls summed over batches)':58s} {'calls':>5s} {'s':>8s} {'%':>6s} {'CPU s':>7s} {'CPU %':>6s} "
      f"{'peak MiB':>9s} {'+MiB':>7s}")
for label, (calls, seconds, peak, grow, cpu) in stats.items():
    print(f"{label:58s} {calls:5d} {seconds:8.2f} {100 * seconds / total:6.1f} {cpu:7.2f} {100 * cpu / cpu_total:6.1f} "
          f"{peak:9.0f} {grow:7.0f}")
print(f"{'total':58s} {'':5s} {total:8.2f} {'':6s} {cpu_total:7.2f}")
"""


def profile_steps(archive: Path, out: Path, batch_mb: int | None) -> None:
    """Convert once more in a child process that times each pipeline step, and print the table."""
    if out.exists():
        shutil.rmtree(out)
    print("profile   per step, one batch at a time, in one process (a child of this one):")
    # from "/" as code_version() does: `python -c` puts the working directory first on the path, and
    # from the repository root that would import its `batch` instead of the package on PYTHONPATH
    # that the convert above ran
    subprocess.run([sys.executable, "-c", PROFILER, str(archive), str(out), str(batch_mb or 0), str(Path(__file__).resolve().parent)],
                   check=True, cwd="/")


def machine() -> dict:
    import polars
    import pyarrow

    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "mem_gib": mem,
        "python": platform.python_version(),
        "polars": polars.__version__,
        "duckdb": duckdb.__version__,
        "pyarrow": pyarrow.__version__,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, help="archive size to generate, MiB (default 2048; with an --archive "
                    "that bench/generate.py wrote, the size it records)")
    ap.add_argument("--archive", type=Path, help="archive folder (default bench/archive/<size>)")
    ap.add_argument("--seed", type=int, help="(default 0; with an --archive that bench/generate.py wrote, the seed "
                    "it records)")
    ap.add_argument("--out", type=Path, help="convert output folder (default bench/results/out-<size>)")
    ap.add_argument("--batch-mb", type=int, help="passed to asr-batch convert (default: the CLI's)")
    ap.add_argument("--workers", type=int, help="passed to asr-batch convert (default: the CLI's)")
    ap.add_argument("--repeat", type=int, default=1, help="run the convert N times; report the fastest")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                    help="before each timing, wait up to SECONDS for other processes to leave the CPUs idle")
    ap.add_argument(
        "--no-invalid-lines", action="store_true",
        help="generate without concatenated objects and truncated last lines (lines that are not valid JSON)",
    )
    ap.add_argument("--profile", action="store_true",
                    help="then convert once more with a timer on every SQL file, write and pipeline step")
    ap.add_argument("--floor", action="store_true",
                    help="also time the floor: the sha256, one JSON parse and one Parquet copy of every line")
    ap.add_argument("--session-mb", type=float, default=0, metavar="MIB",
                    help="then convert one session of MIB (bench/session.py, built from the archive) and report it")
    ap.add_argument("--long-line-mb", type=float, default=0, metavar="MIB",
                    help="then convert a session with one tool-result line of MIB and report the line's peak")
    ap.add_argument("--executors", default="", metavar="NAMES",
                    help="also convert with these executors (comma-separated, e.g. local,dask), alternated with "
                         "each other in the same run: wall and CPU seconds (every process), the largest process's peak")
    ap.add_argument("--codex-mb", type=float, default=0, metavar="MIB",
                    help="also convert a Codex archive and a Claude Code archive of MIB each, alternated: MiB per CPU "
                         "second of each converter and their ratio")
    ap.add_argument("--baseline", metavar="REF",
                    help="also convert with commit REF of this repository (its own virtual environment, kept under "
                         "bench/baseline/) alternated with the checkout: both converters' figures and their ratios")
    ap.add_argument("--upgrade-from", metavar="REF",
                    help="also upgrade an output that commit REF wrote (a tenth of its sessions' files gone, so kept) "
                         "with the checkout, against the checkout's full convert: figures, rows and output sizes")
    ap.add_argument("--final-stage-mb", default="", metavar="SIZES",
                    help="also time the final stage alone, and its peak, in a default convert of an archive of each "
                         "size in MiB (comma-separated; bench/finalize.py, each in its own process; archives are "
                         "generated under bench/archive/ when missing and kept)")
    ap.add_argument("--driver-mb", default="", metavar="SIZES",
                    help="also convert an archive of each size in MiB with --executor dask and print the RSS of the "
                         "process that plans and finalizes after each step (bench/driver.py, each in its own process)")
    ap.add_argument("--keep", action="store_true", help="keep the archive and the converted output")
    args = ap.parse_args(argv)
    if args.baseline:
        args.baseline = baseline_ref.resolve(args.baseline)  # a wrong REF fails here, not after the first converts
    if args.upgrade_from:
        args.upgrade_from = baseline_ref.resolve(args.upgrade_from)
    # a generated --archive is used as it is unless --size-mb or --seed says otherwise (then it is generated again)
    stamped = generate.stamp_path(args.archive.resolve()) if args.archive else None
    recorded = json.loads(stamped.read_text()) if stamped is not None and stamped.is_file() else {}
    args.size_mb = args.size_mb if args.size_mb is not None else recorded.get("size_mb", 2048)
    args.seed = args.seed if args.seed is not None else recorded.get("seed", 0)
    args.no_invalid_lines = args.no_invalid_lines or recorded.get("invalid_lines") is False

    size_tag = f"{args.size_mb:g}"
    name = size_tag + ("-valid" if args.no_invalid_lines else "")
    archive = (args.archive or ROOT / "bench" / "archive" / name).resolve()
    out = (args.out or RESULTS / f"out-{size_tag}").resolve()
    stamp = generate.stamp_path(archive)
    generated = False
    t = time.perf_counter()
    if archive.is_dir() and not stamp.is_file() and args.archive is not None:
        origin = "existing folder"
    else:
        previous = json.loads(stamp.read_text()) if stamp.is_file() else {}
        wanted = {
            "generator_version": generate.GENERATOR_VERSION, "size_mb": args.size_mb, "seed": args.seed,
            "invalid_lines": not args.no_invalid_lines,
        }
        if archive.is_dir() and all(previous.get(k) == v for k, v in wanted.items()):
            origin = f"reused (seed {args.seed})"
        else:
            print(f"generating {args.size_mb:g} MiB into {archive} ...", file=sys.stderr)
            generate.generate(
                args.size_mb, archive, args.seed, invalid_lines=not args.no_invalid_lines, verbose=False
            )
            generated = True
            origin = f"generated in {time.perf_counter() - t:.0f}s (seed {args.seed})"

    try:
        stats = archive_stats(archive)
        version = code_version()
        load_before = os.getloadavg()
        print(f"code      asr-batch: {version}")
        print(f"machine   {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before the run")
        print(f"archive   {archive}  ({origin})")
        print(f"input     {stats['mib']:.1f} MiB, {stats['files']} files, {stats['lines']:,} lines")

        if args.wait_idle:
            wait_idle(args.wait_idle)
        scan = duckdb_scan(archive)
        print(f"scan      DuckDB read_ndjson_objects + count: {scan['seconds']:.2f} s wall, "
              f"{scan['cpu_seconds']:.2f} s CPU warm (first run {scan['first_seconds']:.2f} s), "
              f"{scan['objects']:,} objects")

        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        runs = []
        for _ in range(max(1, args.repeat)):
            if args.wait_idle:
                wait_idle(args.wait_idle)
            runs.append(convert(archive, out, args.batch_mb, args.workers))
        conv = min(runs, key=lambda r: r["seconds"])
        conv["all_seconds"] = [r["seconds"] for r in runs]
        conv["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
        t_ = conv["tables"]
        print(f"convert   {conv['command']}")
        print(f"          {conv['seconds']:.2f} s wall, {conv['cpu_seconds']:.2f} s CPU "
              f"({conv['system_cpu_seconds']:.2f} in the kernel)"
              + (f" (fastest of {len(runs)}: {', '.join(f'{x:.1f}' for x in conv['all_seconds'])})"
                 if len(runs) > 1 else "")
              + f"; sessions {t_['sessions']}, records {t_['records']}, inferences {t_['inferences']}, "
              f"rejected lines {conv['rejected_lines']}")

        ratio = conv["seconds"] / scan["seconds"]
        cpu_ratio = conv["cpu_seconds"] / scan["cpu_seconds"] if scan["cpu_seconds"] else float("nan")
        mibs = stats["mib"] / conv["seconds"]
        rss = conv["peak_rss_mib"]
        print(f"ratio     convert / scan = {ratio:.1f}; in CPU seconds {cpu_ratio:.1f} (for orientation)")
        print(f"speed     convert {mibs:.1f} MiB/s, scan {stats['mib'] / scan['seconds']:.0f} MiB/s")
        print(f"peak RSS  convert process {rss:.0f} MiB (target < {RSS_TARGET_MIB} MiB: "
              f"{'met' if rss < RSS_TARGET_MIB else 'NOT met'})")
        other = conv["other_cpu_seconds"]
        if other is not None and other > 0.05 * conv["seconds"]:
            print(f"note      other processes used {other:.1f} CPU-seconds during the convert: the wall times "
                  "are pessimistic; compare CPU seconds, or run again on an idle machine")

        least = None
        if args.floor:
            if args.wait_idle:
                wait_idle(args.wait_idle)
            least = floor(archive, out.parent / f"floor-{size_tag}")
            print(f"floor     sha256 of every file {least['sha256_cpu_seconds']:.2f} s CPU; one JSON parse of every "
                  f"line {least['parse_seconds']:.2f} s wall, {least['parse_cpu_seconds']:.2f} s CPU; one zstd "
                  f"Parquet copy of every line {least['write_cpu_seconds']:.2f} s CPU")
            print(f"          {least['cpu_seconds']:.2f} CPU-seconds on {least['cpus']} CPUs: at least "
                  f"{least['seconds']:.2f} s wall; floor / scan = {least['seconds'] / scan['seconds']:.1f}")
            wall_floor = conv["seconds"] / least["seconds"]
            cpu_floor = conv["cpu_seconds"] / least["cpu_seconds"]
            # not a target: the output itself costs more than the floor (docs/performance.md, "What
            # this output costs at least"); the target is the ratio against --baseline
            print(f"vs floor  convert / floor = {wall_floor:.1f} wall, {cpu_floor:.1f} in CPU seconds")
            least["convert_ratio"], least["convert_cpu_ratio"] = wall_floor, cpu_floor
            written = output_writes(out, out.parent / f"output-{size_tag}")
            bound = least["sha256_cpu_seconds"] + least["parse_cpu_seconds"] + written["cpu_seconds"]
            largest = sorted(written["tables"].items(), key=lambda kv: -kv[1])
            print(f"output    writing this output's {len(largest)} tables again {written['cpu_seconds']:.2f} s CPU ("
                  + ", ".join(f"{name} {cpu:.2f}" for name, cpu in largest[:3])
                  + f", the others {sum(cpu for _, cpu in largest[3:]):.2f}); with the sha256 and the parse "
                  f"{bound:.2f} CPU-seconds = {bound / least['cpu_seconds']:.1f} x the floor: the least any "
                  f"converter writing this output does; convert / that = {conv['cpu_seconds'] / bound:.1f}")
            least["output_write_cpu_seconds"], least["output_write_tables"] = written["cpu_seconds"], written["tables"]
            least["output_bound_cpu_seconds"] = bound
            least["convert_output_bound_cpu_ratio"] = conv["cpu_seconds"] / bound

        versus = against_baseline(archive, out.parent / f"baseline-{size_tag}", args) if args.baseline else None
        upgraded = upgrade(archive, out.parent / f"upgrade-{size_tag}", out, conv, args) if args.upgrade_from else None
        by_executor = executor_runs(archive, out, args) if args.executors else None
        agents = codex_speed(out.parent / "agents", args.codex_mb, args) if args.codex_mb else None

        one = None
        if args.session_mb:
            one = large_session(archive, out.parent / f"session-{args.session_mb:g}", args.session_mb, args)

        line = long_line(out.parent, args.long_line_mb) if args.long_line_mb else None
        stages = per_archive("finalize.py", args.final_stage_mb, "final") if args.final_stage_mb else None
        drivers = per_archive("driver.py", args.driver_mb, "driver") if args.driver_mb else None

        reruns = rerun(archive, out, args.batch_mb, args.workers, conv)
        for r in reruns:
            target = RERUN_TARGETS.get(r["label"], RERUN_TARGETS["1% of sessions grown"])
            reused = r["reuse"] or {}
            grown = f" ({r['grown']} files)" if r["grown"] else ""
            print(f"rerun     {r['label']}{grown}: "
                  f"{r['seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s CPU = {100 * r['share']:.1f}% of the "
                  f"convert ({100 * r['cpu_share']:.1f}% in CPU; target in CPU <= {100 * target:g}%: "
                  f"{'met' if r['cpu_share'] <= target else 'NOT met'}); reused "
                  f"{reused.get('session_groups_reused', 0)} session groups, converted "
                  f"{reused.get('session_groups_converted', 0)}, final stage {reused.get('final_stage')}")
            if reused.get("deltas"):
                d = reused["deltas"]
                fell = ", ".join(f"{t} ({n})" for t, n in d["tables_fell_back"].items()) or "none"
                print(f"          {d['session_groups']} grown groups re-run as deltas ({d['rewritten']} rewritten, "
                      f"not appended to); tables that fell back (groups): {fell}")

        result = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "code": version,
            "machine": machine(),
            "archive": {"path": str(archive), "origin": origin, **stats},
            "scan": scan,
            "convert": conv,
            "floor": least,
            "reruns": reruns,
            "large_session": one,
            "long_line": line,
            "executors": by_executor,
            "agents": agents,
            "against_baseline": versus,
            "upgrade": upgraded,
            "final_stage": stages,
            "driver": drivers,
            "ratio": ratio,
            "cpu_ratio": cpu_ratio,
            "load_average_before": load_before[0],
            "convert_mib_per_s": mibs,
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"run-{size_tag}mb.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        if args.profile:
            profile_steps(archive, out, args.batch_mb)
        print(f"summary: {stats['mib']:.0f} MiB: convert {conv['seconds']:.1f} s, scan {scan['seconds']:.2f} s, "
              f"ratio {ratio:.1f}, {mibs:.1f} MiB/s, peak RSS {rss:.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
            if generated:
                shutil.rmtree(archive, ignore_errors=True)
                stamp.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
