"""What holding per-file rows costs a process, by where they are held: the RSS added by N rows of what
discovery keeps per file (shown name, path, size, modification time, session), each way in a fresh
process of its own.

    python bench/held.py [--rows 24000,240000]

- `python`: a tuple of Python values per file, as the driver holds them now;
- `polars`: one Polars frame, built 4,096 rows at a time;
- `arrow-parquet`: pyarrow tables of 4,096 rows written to a Parquet file, nothing kept;
- `duckdb`: an on-disk DuckDB table under a 64 MB memory limit, 4,096 rows inserted at a time.

The figures of docs/performance.md ("A cluster run, on paper") on where the driver's per-file
state can go are from this script.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from rss import status

CHUNK = 4096
WAYS = ("python", "polars", "arrow-parquet", "duckdb")


def rows(start: int, n: int) -> dict[str, list]:
    names = [f"archive/-Users-someone-project-{i % 300}/{i:08d}-aaaa-bbbb-cccc-{i:012d}.jsonl" for i in range(start, start + n)]
    return {
        "name": names, "path": ["/home/someone/.claude/projects/" + name for name in names],
        "size": list(range(start, start + n)), "mtime": [1_700_000_000_000_000_000 + i for i in range(start, start + n)],
        "session": [f"{i:08d}-aaaa-bbbb-cccc-{i:012d}" for i in range(start, start + n)],
    }


def hold(way: str, total: int, folder: str) -> int:
    """The RSS (MiB) `total` rows add when held `way`, after a first chunk has loaded the libraries."""
    import duckdb
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    pa.set_memory_pool(pa.system_memory_pool())  # as the driver's (batch/run/memory.py, arrow_pool)
    kept: list = []
    con = duckdb.connect(os.path.join(folder, "held.duckdb"))
    con.execute("set memory_limit = '64MB'")
    con.execute("create table files (name varchar, path varchar, size bigint, mtime bigint, session varchar)")
    writer = pq.ParquetWriter(os.path.join(folder, "held.parquet"), pa.table(rows(0, 1)).schema)

    def add(start: int, n: int) -> None:
        chunk = rows(start, n)
        if way == "python":
            kept.extend(zip(*chunk.values()))
        elif way == "polars":
            kept.append(pl.DataFrame(chunk))
        elif way == "arrow-parquet":
            writer.write_table(pa.table(chunk))
        else:
            con.register("chunk", pa.table(chunk))
            con.execute("insert into files select * from chunk")
            con.unregister("chunk")

    add(0, 10)
    before = status("VmRSS")
    for start in range(10, total, CHUNK):
        add(start, min(CHUNK, total - start))
    if way == "polars":
        kept[:] = [pl.concat(kept, rechunk=True)]
    con.execute("checkpoint")
    writer.close()
    return status("VmRSS") - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="24000,240000", help="row counts, comma-separated")
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # one measure, in the child
    args = parser.parse_args()
    if args.way:
        with tempfile.TemporaryDirectory() as folder:
            print(hold(args.way, int(args.rows), folder))
        return
    for total in (int(n) for n in args.rows.split(",")):
        added = {
            way: subprocess.run([sys.executable, __file__, "--rows", str(total), "--way", way],
                                capture_output=True, text=True, check=True).stdout.strip()
            for way in WAYS
        }
        print(f"{total:,} rows: " + ", ".join(f"{way} +{mib} MiB" for way, mib in added.items()), flush=True)


if __name__ == "__main__":
    main()
