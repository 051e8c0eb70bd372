"""The RSS of the process that plans and finalizes a convert, after each of its steps.

    python bench/driver.py ARCHIVE [--executor dask|local|tcp://HOST:PORT] [--out OUTPUT]

Converts the archive (a Claude Code projects folder, e.g. one bench/generate.py wrote) in this
process into a temporary folder and prints the RSS (`VmRSS`, MiB) after discovery, the plan, the
tasks and the settling of the run (the reuse state and the manifest's inputs written), before the
final stage, and the peak from then to the end (the final stage, the catalog, the commit). With
`--executor dask` (the default) the batches run in two worker processes of a LocalCluster, whose
scheduler runs in this process too; with the address of a running scheduler (`dask scheduler`, its
workers started with this checkout on their PYTHONPATH) the figures are those of the driver alone, as
on a cluster (docs/performance.md, "A cluster run, on paper"). With `--out`, the run converts into
OUTPUT instead: over an output there, a re-run (give it a copy: `cp -al` links the parts, which a run
never changes in place).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import batch
from batch.incremental import plan as incremental
from batch.run import finalize, finish, schedule
from batch.sources import registry
from rss import reset_peak, status


def _after(module, name: str, label: str, seen: dict) -> None:
    """Record the RSS when `module.name` returns."""
    real = getattr(module, name)

    def measured(*args, **kw):
        result = real(*args, **kw)
        seen[label] = status("VmRSS")
        return result

    setattr(module, name, measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--executor", default="dask", help="dask (the default), local, or a scheduler's address")
    parser.add_argument("--out", type=Path, help="convert into this folder (a re-run over an output there)")
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
        return real(*a, **kw)

    finalize.finalize = stage
    with tempfile.TemporaryDirectory() as tmp:
        result = batch.convert([args.archive], args.out or Path(tmp) / "out", executor=args.executor, workers=2)
        seen["peak from the final stage on"] = status("VmHWM")
    print(f"{args.archive} ({result.inputs:,} files, {args.executor}): "
          + ", ".join(f"{k} {v} MiB" for k, v in seen.items()), flush=True)


if __name__ == "__main__":  # a LocalCluster's workers import this module: nothing runs then
    main()
