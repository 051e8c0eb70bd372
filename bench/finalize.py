"""Time and peak memory of the final stage alone, in a default convert of an archive.

    python bench/finalize.py ARCHIVE [ARCHIVE ...]

Each archive (a Claude Code projects folder, e.g. one bench/generate.py wrote) is converted in this
process into a temporary folder; the final stage (`finalize.finalize`) is timed alone, in wall and
CPU seconds, and its peak RSS is read after `/proc/self/clear_refs` reset the peak to the RSS before
it (Linux). Prints one line per archive: its size, records and batches, the size of the `_work`
tables the stage reads, the stage's times, the RSS before it, the peak during it, the peak with the
catalog and the commit that follow it, and the whole run's peak (the batches' or those).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

import batch
from batch.run import finalize
from rss import reset_peak, status


def measure(archive: Path) -> str:
    real, seen = finalize.finalize, {}

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
                    peak=status("VmHWM"), work=work / (1 << 20))
        return result

    finalize.finalize = timed
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = batch.convert([archive], Path(tmp) / "out")
            seen["end"] = status("VmHWM")  # the peak since the stage began: it, the catalog, the commit
    finally:
        finalize.finalize = real
    size = sum(f.stat().st_size for f in archive.rglob("*.jsonl")) / (1 << 20)
    return (f"{archive}: {size:,.0f} MiB, {result.tables['records']:,} records, {seen['batches']} batches, "
            f"_work {seen['work']:.1f} MiB; final stage {seen['wall']:.2f} s wall, {seen['cpu']:.2f} CPU-s, "
            f"RSS {seen['before']} MiB before it, peak {seen['peak']} MiB during it, {seen['end']} MiB with the "
            f"catalog and the commit after it; the whole run's peak {max(seen['end'], seen['batches_peak'])} MiB")


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(measure(Path(path)), flush=True)
