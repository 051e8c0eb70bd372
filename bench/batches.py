"""CPU seconds of a convert by step, at a given number of workers and batch size, with or without a large batch's memory limit.

    python bench/batches.py ARCHIVE [--workers N] [--batch-mb MIB] [--no-limit] [--rss] [--out DIR]

Converts ARCHIVE (a Claude Code projects folder, e.g. one bench/generate.py wrote) in this process,
one convert per invocation, and prints the process's CPU seconds (user and kernel), wall seconds,
peak RSS and minor page faults, then the CPU seconds of each step of the Claude Code converter on the
thread of the batch that ran it (DuckDB runs its statements there with one thread per batch;
Polars' threads and the hasher's are not counted; the writes of the tables written as the
statements go are counted in the statements' step too). `--no-limit` raises the converter's
`LARGE_BATCH_BYTES` in this process, so that a batch larger than 64 MiB runs without the memory
limit of a large batch, as a smaller one does (docs/decisions/007-one-large-session.md): the batch
size alone.
The output goes to a temporary folder unless `--out` names one (to compare it with
bench/compare.py). `--rss` also prints, as each step of the converter ends, the RSS before and
after it and the peak within it (Linux: the peak is reset through /proc/self/clear_refs at each
step's start); with one worker, what each step leaves held. The run's peak is then the highest of
the steps' peaks and of what follows the last step.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import batch
from batch.formats.claude_code import converter
from batch.run import task
from rss import reset_peak, status

# (owner, attribute, name, whether --rss reports it)
STEPS = (
    (converter, "_load", "the lines handed to DuckDB (_load)", True),
    (converter, "_observe", "the decode and classification (_observe)", True),
    (converter, "_narrow", "the narrow steps (_narrow)", True),
    (converter, "_fold", "records, parts, source lines, tool calls (_fold)", True),
    (converter, "_statements", "the other statements, and writes (_statements)", True),
    (task.BatchParts, "add_relation", "the writes (BatchParts.add_relation)", False),
    (task, "convert_batch", "the whole batch (task.convert_batch)", False),
)


PEAKS: list[int] = []  # each reported step's peak: --rss resets the process's


def timed(spent: dict, name: str, function, rss: bool):
    def step(*args, **kwargs):
        if rss:
            before = status("VmRSS")
            reset_peak()
        start = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name][0] += time.thread_time() - start
            spent[name][1] += 1
            if rss:
                after, peak = status("VmRSS"), status("VmHWM")
                PEAKS.append(peak)
                print(f"  {name:52s} RSS {before:6,d} -> {after:6,d} MiB, peak within {peak:6,d}", flush=True)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--workers", type=int, default=None, help="batches at once (default: the CLI's)")
    parser.add_argument("--batch-mb", type=int, default=None, help="batch size in MiB (default: the CLI's)")
    parser.add_argument("--no-limit", action="store_true", help="no memory limit for a large batch")
    parser.add_argument("--out", type=Path, help="output folder (default: a temporary one, removed)")
    parser.add_argument("--rss", action="store_true", help="print each step's RSS before and after it and its peak")
    args = parser.parse_args()
    if args.no_limit:
        converter.LARGE_BATCH_BYTES = 1 << 40
    spent: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for owner, attr, name, reported in STEPS:
        setattr(owner, attr, timed(spent, name, getattr(owner, attr), args.rss and reported))
    options = {}
    if args.workers is not None:
        options["workers"] = args.workers
    if args.batch_mb is not None:
        options["batch_bytes"] = args.batch_mb << 20
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        batch.convert([args.archive], args.out or Path(tmp) / "out", **options)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{args.archive}: workers {options.get('workers', 'default')}, batches of "
          f"{args.batch_mb or 'default'} MiB{', no limit' if args.no_limit else ''}: "
          f"{wall:.2f} s wall, {usage.ru_utime + usage.ru_stime:.2f} CPU-s ({usage.ru_stime:.2f} in the kernel), "
          f"peak {max([usage.ru_maxrss >> 10, *PEAKS])} MiB, {usage.ru_minflt / 1e6:.2f} M minor faults")
    for _, _, name, _ in STEPS:
        seconds, calls = spent[name]
        print(f"  {name:52s} {calls:4d} calls {seconds:7.2f} CPU-s on the batch's thread")


if __name__ == "__main__":
    sys.exit(main())
