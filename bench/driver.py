"""The RSS of the process that plans and finalizes a convert, after each of its steps.

    python bench/driver.py ARCHIVE [--executor dask|local|tcp://HOST:PORT] [--out OUTPUT] [--grown SHARE]
                           [--tool-results N] [--steps]

Converts the archive (a Claude Code projects folder, e.g. one bench/generate.py wrote) in this process
into a temporary folder and prints the RSS (`VmRSS`, MiB) after discovery, the plan (with what it takes
of a previous output: deltas, carving), the tasks and the settling of the run (the reuse state and the
manifest's inputs written), each with its peak (`VmHWM`, reset after each step), before the final stage,
the final stage's peak, and the peak from then to the end (the manifest, the catalog, the commit). With
`--executor dask` (the default) the batches run in two worker processes of a LocalCluster, whose
scheduler runs in this process too; with the address of a running scheduler (`dask scheduler`, its
workers started with this checkout on their PYTHONPATH) the figures are those of the driver alone, as on
a cluster (docs/performance.md, "A cluster run, on paper"). With `--out`, the run converts into OUTPUT
instead: over an output there, a re-run (give it a copy: `cp -al` links the parts, which a run never
changes in place). With `--grown SHARE`, a re-run after growth: a hard-linked copy of ARCHIVE is
converted first (by the CLI, in a process of its own), SHARE of its main transcripts are grown by a line
(bench/grow.py), and this process converts the copy again over that output. With `--tool-results N`, a
hard-linked copy of ARCHIVE holding N persisted tool results (`<sessionId>/tool-results/` files, spread
over its main transcripts) is converted. With `--steps`, also a line per statement of the final stage,
as `bench/finalize.py --steps` prints them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import batch
from batch import sql
from batch.incremental import plan as incremental
from batch.run import finalize, finish, schedule
from batch.sources import registry
from grow import grow_sessions
from finalize import measured_steps
from rss import reset_peak, status


def _after(module, name: str, label: str, seen: dict) -> None:
    """Record the RSS when `module.name` returns, and the peak since the previous step."""
    real = getattr(module, name)

    def measured(*args, **kw):
        result = real(*args, **kw)
        seen[label] = f"{status('VmRSS')} (peak {status('VmHWM')})"
        reset_peak()
        return result

    setattr(module, name, measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--executor", default="dask", help="dask (the default), local, or a scheduler's address")
    parser.add_argument("--out", type=Path, help="convert into this folder (a re-run over an output there)")
    parser.add_argument("--grown", type=float, metavar="SHARE",
                        help="a re-run after SHARE of the main transcripts of a copy of ARCHIVE grew by a line")
    parser.add_argument("--tool-results", type=int, default=0, metavar="N",
                        help="N persisted tool results added to a copy of ARCHIVE")
    parser.add_argument("--steps", action="store_true", help="a line per statement of the final stage")
    args = parser.parse_args()
    seen = {"imports": status("VmRSS")}
    _after(registry, "discover", "discovery", seen)
    _after(incremental, "take_previous", "plan", seen)
    _after(schedule, "run_plan", "tasks", seen)
    _after(finish, "settle", "settled", seen)
    real = finalize.finalize

    def stage(*a, **kw):
        seen["before the final stage"] = status("VmRSS")
        reset_peak()
        result = real(*a, **kw)
        seen["the final stage's peak"] = max([status("VmHWM"), *peaks])
        reset_peak()
        return result

    finalize.finalize = stage
    lines, peaks = [], []  # the final stage's statements (`--steps`), each resetting the peak
    if args.steps:
        sql.within_limit = measured_steps(lines, peaks)
    with tempfile.TemporaryDirectory() as tmp:
        archive, out, made = args.archive, args.out or Path(tmp) / "out", ""
        if args.grown or args.tool_results:
            archive = Path(tmp) / "input" / args.archive.name  # the same folder name: tables name files by it
            shutil.copytree(args.archive, archive, copy_function=os.link)
        if args.tool_results:
            made += f", {add_tool_results(archive, args.tool_results)} tool results"
        if args.grown:
            subprocess.run([sys.executable, "-m", "batch", "convert", str(archive), "--out", str(out), "-q"], check=True)
            made += f", {grow_sessions(archive, args.grown)} transcripts grown"
        reset_peak()
        result = batch.convert([archive], out, executor=args.executor, workers=2)
        seen["the manifest's, the catalog's and the commit's"] = status("VmHWM")
    print(f"{args.archive} ({result.inputs:,} files, {args.executor}{made}): "
          + ", ".join(f"{k} {v} MiB" for k, v in seen.items()), flush=True)
    if lines:
        print("\n".join(lines), flush=True)


def add_tool_results(archive: Path, count: int) -> int:
    """Write `count` small tool-results/ files beside the main transcripts of `archive`, in turn, named
    as Claude Code names them (toolu_ and 24 characters)."""
    mains = sorted(p for p in archive.glob("*/*.jsonl") if not p.name.startswith("agent-"))
    for n in range(count):
        folder = mains[n % len(mains)].with_suffix("") / "tool-results"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"toolu_01{hashlib.sha256(str(n).encode()).hexdigest()[:22]}.txt").write_text("output")
    return count


if __name__ == "__main__":  # a LocalCluster's workers import this module: nothing runs then
    main()
