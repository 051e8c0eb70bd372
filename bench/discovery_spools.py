"""Discovery's DuckDB queries over its spools at a scale no test archive reaches, on synthetic entries.

    python bench/discovery_spools.py N [--memory-mb M]

Builds, in a temporary folder, a walk of N transcripts (`sources.walk.Walk`; every other one reaching the
same real file as the one before it, as a link or a source inside another would), a previous run's heads of
N entries (half of them the walk's), a files table of the N transcripts, N/2 sidecars (half of them
without their transcript) and N/4 compressed rollouts (half of them beside their plain form), and N
names of persisted tool results (N/2 distinct). Then runs each query as discovery does and prints, per
step, its wall and CPU seconds and the peak RSS (`VmHWM`, reset before it) above the RSS before it, in
MiB: the copies found and the heads joined to the walk (`Walk.entries`), the sidecars and compressed rollouts resolved
(`claude_code._resolve_beside`), the tool results' names sorted once each (`claude_code._distinct`).
`--memory-mb` sets discovery's DuckDB limit (`WALK_MEMORY`) instead of its default.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from batch.run.memory import arrow_pool
from batch.sources import claude_code, walk
from batch.sources.base import Stream
from rss import reset_peak, status

FOLDER = "-Users-someone-workspace-a-project-with-a-long-name"


def _name(i: int, suffix: str = ".jsonl") -> str:
    return f"projects/{FOLDER}/{i:08d}-aaaa-4bbb-8ccc-dddddddddddd/subagents/agent-{i:08d}{suffix}"


def _measure(label: str, step) -> None:
    rss, wall, cpu = status("VmRSS"), time.perf_counter(), time.process_time()
    reset_peak()
    found = step()
    print(f"{label}: {found:,} rows, {time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} CPU-s, "
          f"peak {status('VmHWM') - rss} MiB above the RSS before ({rss} MiB)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("--memory-mb", type=int)
    args = parser.parse_args()
    arrow_pool()
    if args.memory_mb:
        walk.WALK_MEMORY = args.memory_mb << 20
    n = args.n
    with tempfile.TemporaryDirectory(prefix="asr-bench-discovery-") as tmp:
        folder = Path(tmp)
        walked = walk.Walk(folder)
        for i in range(n):
            walked.spool.add({"path": f"/home/u/.claude/{_name(i)}".encode(), "name": _name(i), "folders": [FOLDER.encode()],
                              "problem": None, "size": i, "mtime_ns": i, "real": (i // 2).to_bytes(16, "big")})
        walked.close()
        heads = ((_name(i), [i, i, None, f"{i:08d}-aaaa-4bbb-8ccc-dddddddddddd"]) for i in range(0, 2 * n, 2))
        _measure("copies found and heads joined to the walk",
                 lambda: sum(seen is not None or copy is not None for *_, copy, seen in walked.entries(heads)))

        found = claude_code.Discovery(claude_code.FileTable(folder / "files"))
        for i in range(n):
            found.files.add(Stream(_name(i), i, "main", f"s{i}", f"s{i}", path=f"/home/u/.claude/{_name(i)}", mtime_ns=i),
                            (None, None))
        beside = walk.Spool(folder, "beside", claude_code._BESIDE)
        for i in range(0, n, 2):
            of = i if i % 4 else n + i  # (half of them beside a transcript found)
            beside.add({"path": f"/home/u/.claude/{_name(of, '.meta.json')}".encode(), "name": _name(of, ".meta.json"),
                        "transcript": f"/home/u/.claude/{_name(of)}".encode()})
            if i % 4 == 0:  # (half of them beside their plain form; the others cannot be read)
                plain = _name(i if i % 8 else n + i)
                beside.add({"path": f"/nowhere/{plain}.zst".encode(), "name": plain + ".zst", "plain": plain,
                            "suffix": ".zst", "size": 1, "mtime_ns": 1})
        beside.close()

        def resolve() -> int:
            claude_code._resolve_beside(found, beside, walked.con)
            return beside.count

        _measure("sidecars and compressed rollouts resolved", resolve)

        names = walk.Spool(folder, "tool-results", pa.schema([("name", pa.string())]))
        for i in range(n):
            names.add({"name": f"toolu_{i // 2:012d}.txt"})
        names.close()
        _measure("tool results' names sorted once each",
                 lambda: n if claude_code._distinct(names, folder / "n.jsonl", walked.con) else 0)
        walked.remove()


if __name__ == "__main__":
    main()
