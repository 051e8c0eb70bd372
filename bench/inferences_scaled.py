"""The final stage's two inference steps over K copies of an archive's observations: is their time linear?

    python bench/inferences_scaled.py ARCHIVE [--copies 1,2,4]

Converts ARCHIVE (a Claude Code projects folder, e.g. one bench/generate.py wrote) in a temporary
folder, keeping the tables the two steps read (`inference_candidates`, `lineage_evidence`,
`session_streams`, `request_contexts`). Then, for each K, it builds and writes `inference_observations`
and `inferences` as the final stage does, with the steps toward them (sql/final/, one DuckDB of
`FINAL_MEMORY`, spilling to the temporary folder) over K copies of those tables, their keys suffixed by
the copy so that copies never meet: the rows of an archive K times as large, without converting one.
Prints, per K and statement, its wall and CPU seconds, the RSS before it and its peak (`VmHWM`, reset
before it); a statement that overruns the limit is reported, not run again without it as the final stage
would.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import duckdb

import batch
from batch import sql
from batch.output.parts import copy_statement
from batch.run import finalize
from batch.run.memory import FINAL_MEMORY, connect
from batch.schema import TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS
from rss import reset_peak, status

STEPS = ("inference_observations", "inferences")
# the tables the steps read, and their columns that name a session or an inference (suffixed by the copy)
READ = {
    "inference_candidates": ("inference_id", "session_key"),
    "lineage_evidence": ("child_session_key", "parent_session_key"),
    "session_streams": ("session_key",),
    "request_contexts": ("inference_id", "session_key"),
}


def capture(archive: Path, folder: Path) -> None:
    """Convert `archive`, hard-linking the part files of the tables `READ` into `folder` as the final stage begins."""
    real = finalize.finalize

    def linked(con, output, *args, **kw):
        for name in READ:
            (folder / name).mkdir(parents=True)
            for path in output.files(name, work=name in WORK_SCHEMAS):
                os.link(path, folder / name / Path(path).name)
        return real(con, output, *args, **kw)

    finalize.finalize = linked
    try:
        batch.convert([archive], folder / "out")
    finally:
        finalize.finalize = real
    shutil.rmtree(folder / "out")


def copies(con: duckdb.DuckDBPyConnection, folder: Path, k: int) -> None:
    """Write `k` copies of each table `READ` into folder/<k>/ and read them as views of their names."""
    for name, keys in READ.items():
        target = folder / str(k) / name
        target.mkdir(parents=True)
        files = sorted(str(p) for p in (folder / name).glob("*.parquet"))
        if not files:  # no batch held a row of it
            con.register(name, (WORK_SCHEMAS.get(name) or TABLES_BY_NAME[name].schema).empty_table())
            continue
        scan = con.read_parquet(files)
        for i in range(k):
            suffixed = ", ".join(f"{c} || '~{i}' as {c}" for c in keys if c in scan.columns)
            con.execute(f"copy (select * replace ({suffixed}) from read_parquet($files)) to '{target}/{i}.parquet' "
                        "(format parquet, compression zstd)", {"files": files})
        con.execute(f"create or replace view \"{name}\" as select * from read_parquet('{target}/*.parquet')")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(folder: Path, k: int) -> list[str]:
    spill = folder / f"spill-{k}"
    spill.mkdir()
    con = connect(spill=spill, memory=FINAL_MEMORY)
    copies(con, folder, k)
    lines = []
    for name in sql.order(STEPS, given=READ):  # the steps toward them too, built and not written
        statements = [(f"build {name}", f'create temp table "{name}" as\n' + sql._statement(name))]
        if name in TABLES_BY_NAME:
            statements.append(
                (f"write {name}", copy_statement(TABLES_BY_NAME[name], name, folder / f"{name}-{k}.parquet")))
        for label, statement in statements:
            before = status("VmRSS")
            reset_peak()
            wall, started = time.perf_counter(), cpu()
            try:
                con.execute(statement)
            except duckdb.OutOfMemoryException:
                lines.append(f"  {label}: over the limit after {time.perf_counter() - wall:.2f} s")
                return lines
            rows = con.sql(f'select count(*) from "{name}"').fetchall()[0][0]
            lines.append(f"  {label}: {time.perf_counter() - wall:.2f} s wall, {cpu() - started:.2f} CPU-s, "
                         f"RSS {before} -> peak {status('VmHWM')} MiB ({rows:,} rows)")
    con.close()
    shutil.rmtree(spill)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--copies", default="1,2,4", help="the Ks, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        capture(args.archive, folder)
        for k in (int(n) for n in args.copies.split(",")):
            print(f"{args.archive} x {k}:", flush=True)
            print("\n".join(measure(folder, k)), flush=True)


if __name__ == "__main__":
    main()
