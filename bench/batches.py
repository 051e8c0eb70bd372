"""CPU seconds of a convert by step, at a given number of workers and batch size, with or without the store.

    python bench/batches.py ARCHIVE [--workers N] [--batch-mb MIB] [--in-memory] [--rss] [--out DIR]

Converts ARCHIVE (a Claude Code projects folder, e.g. one bench/generate.py wrote) in this process,
one convert per invocation, and prints the process's CPU seconds (user and kernel), wall seconds,
peak RSS and minor page faults, then the CPU seconds of each step of the Claude Code converter on the
thread of the batch that ran it (DuckDB runs its statements there with one thread per batch;
Polars' threads and the hasher's are not counted). `--in-memory` raises the converter's
`STORE_BYTES` and `PASS2_CHUNK_BYTES` in this process, so that a batch larger than 64 MiB is
converted in memory as a smaller one is, instead of in a store (docs/decisions/006-the-store.md):
the batch size alone, at the cost of about 380 MiB plus 5.4 times the batch of memory per worker.
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
from batch.formats.claude_code import converter, narrow, pass1, pass2
from batch.output import parts
from batch.run import task
from rss import reset_peak, status

# (owner, attribute, name, whether --rss reports it)
STEPS = (
    (pass1, "decode", "pass 1 (pass1.decode)", True),
    (narrow, "run", "the narrow stage (narrow.run)", True),
    (pass2, "run", "pass 2 (pass2.run)", True),
    (converter, "_core_tables", "tool_calls and the core tables", True),
    (converter, "_run_steps", "the other statements (_run_steps)", True),
    (parts.PartWriter, "append", "the writes (PartWriter.append; the final stage's too)", False),
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
    parser.add_argument("--in-memory", action="store_true", help="convert every batch in memory, never in a store")
    parser.add_argument("--out", type=Path, help="output folder (default: a temporary one, removed)")
    parser.add_argument("--rss", action="store_true", help="print each step's RSS before and after it and its peak")
    args = parser.parse_args()
    if args.in_memory:
        converter.STORE_BYTES = converter.PASS2_CHUNK_BYTES = 1 << 40
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
          f"{args.batch_mb or 'default'} MiB{', in memory' if args.in_memory else ''}: "
          f"{wall:.2f} s wall, {usage.ru_utime + usage.ru_stime:.2f} CPU-s ({usage.ru_stime:.2f} in the kernel), "
          f"peak {max([usage.ru_maxrss >> 10, *PEAKS])} MiB, {usage.ru_minflt / 1e6:.2f} M minor faults")
    for _, _, name, _ in STEPS:
        seconds, calls = spent[name]
        print(f"  {name:52s} {calls:4d} calls {seconds:7.2f} CPU-s on the batch's thread")


if __name__ == "__main__":
    sys.exit(main())
