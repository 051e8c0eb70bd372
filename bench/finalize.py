"""Time and peak memory of the final stage alone, in a default convert of an archive.

    python bench/finalize.py ARCHIVE [ARCHIVE ...] [--steps]

Each archive (a Claude Code projects folder, e.g. one bench/generate.py wrote) is converted in this
process into a temporary folder; the final stage (`finalize.finalize`) is timed alone, in wall and
CPU seconds, and its peak RSS is read after `/proc/self/clear_refs` reset the peak to the RSS before
it (Linux). Prints one line per archive: its size, records and batches, the size of the `_work`
tables the stage reads, the stage's times, the RSS before it, the peak during it, the peak with the
catalog and the commit that follow it, and the whole run's peak (the batches' or those). With
`--steps`, also a line per statement of the stage (each table built, each table written): the RSS
before it and its peak (reset before it), its wall seconds, and what DuckDB holds after it in memory
and in its temporary files (`duckdb_memory()`, MiB).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

import batch
from batch import sql
from batch.run import finalize
from rss import reset_peak, status


def measured_steps(lines: list[str], peaks: list[int]):
    """`sql.within_limit` recording a line per statement into `lines`, and its peak into `peaks`."""
    real = sql.within_limit

    def within(con, run):
        # what the stage's lambdas are given: a table's name, or its schema and relation
        step, *rest = run.__defaults__ or ("a statement",)
        label = f"write {step.name} from {rest[0]}" if hasattr(step, "name") else f"build {step}"
        before, started = status("VmRSS"), time.perf_counter()
        reset_peak()
        result = real(con, run)
        seconds, peak = time.perf_counter() - started, status("VmHWM")
        peaks.append(peak)
        held = con.sql("select sum(memory_usage_bytes) >> 20, sum(temporary_storage_bytes) >> 20 from duckdb_memory()")
        memory, spilled = held.fetchall()[0]
        lines.append(f"  {label}: RSS {before} -> peak {peak} MiB, {seconds:.2f} s; DuckDB holds {memory} MiB, "
                     f"{spilled} MiB in temporary files")
        return result

    return within


def measure(archive: Path, steps: list[str] | None = None) -> str:
    real, real_within, seen, peaks = finalize.finalize, sql.within_limit, {}, []

    def timed(con, output, *args, **kw):
        seen["before"] = status("VmRSS")
        seen["batches_peak"] = status("VmHWM")
        reset_peak()
        work = sum(f.stat().st_size for f in (output.tmp / "_work").rglob("*.parquet"))
        seen["batches"] = len(list((output.tmp / "records").glob("*.parquet")))
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        result = real(con, output, *args, **kw)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        seen.update(wall=time.perf_counter() - t0, cpu=r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
                    peak=max([status("VmHWM"), *peaks]), work=work / (1 << 20))
        return result

    finalize.finalize = timed
    if steps is not None:
        sql.within_limit = measured_steps(steps, peaks)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = batch.convert([archive], Path(tmp) / "out")
            seen["end"] = max([status("VmHWM"), *peaks])  # the peak since the stage began: it, the catalog, the commit
    finally:
        finalize.finalize, sql.within_limit = real, real_within
    size = sum(f.stat().st_size for f in archive.rglob("*.jsonl")) / (1 << 20)
    return (f"{archive}: {size:,.0f} MiB, {result.tables['records']:,} records, {seen['batches']} batches, "
            f"_work {seen['work']:.1f} MiB; final stage {seen['wall']:.2f} s wall, {seen['cpu']:.2f} CPU-s, "
            f"RSS {seen['before']} MiB before it, peak {seen['peak']} MiB during it, {seen['end']} MiB with the "
            f"catalog and the commit after it; the whole run's peak {max(seen['end'], seen['batches_peak'])} MiB")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--steps"]
    for path in args:
        lines = [] if len(args) < len(sys.argv) - 1 else None
        print(measure(Path(path), lines), flush=True)
        if lines:
            print("\n".join(lines), flush=True)
