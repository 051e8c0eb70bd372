"""The memory model of a run and what each batch runs on: how many batches at once and how large,
what a large session needs, the DuckDB connection of a batch, Arrow's allocator, and the stop that
interrupts running batches."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa

from batch import sql
from batch.formats.claude_code.converter import LARGE_BATCH_BYTES, LARGE_BATCH_MEMORY
from batch.sources.base import Unit
from batch.transforms import elide


# Peak memory grows with workers x batch size (docs/decisions/002-two-batches.md): two batches of
# 48 MiB at once peak at 0.9 to 1.0 GiB; 64 MiB ones take 4 to 5% less CPU but peak above 1 GiB,
# 32 MiB ones take 17% more CPU.
DEFAULT_BATCH_BYTES = 48 << 20
DEFAULT_WORKERS = 2
# Peak memory of one session converted alone: at most about BASE + FACTOR x its input, without a
# memory limit; a session larger than LARGE_BATCH_BYTES runs within DuckDB's limit LARGE_BATCH_MEMORY
# and peaks below LARGE_SESSION_MEMORY whatever its size (docs/decisions/007-one-large-session.md).
BATCH_MEMORY_BASE = 384 << 20
BATCH_MEMORY_FACTOR = 7
LARGE_SESSION_MEMORY = 1536 << 20
# DuckDB's temporary files of a session larger than LARGE_BATCH_BYTES, in the run folder: up to about
# this many times its size (the 1,026 MiB session: 3.9 GB; docs/decisions/007-one-large-session.md)
LARGE_SESSION_DISK_FACTOR = 4
# DuckDB's memory limit in the final stage, which builds the cross-session tables over every part:
# its joins and sorts spill to the run folder beyond it, so the driver's memory does not grow with the
# archive (docs/performance.md, "The final stage at scale")
FINAL_MEMORY = 256 << 20
# Decoding one line's JSON (sql/batch/decode/observations.sql) holds up to about this many times the line's size
# in DuckDB, where its length is not in strings elided before the decode (docs/decisions/001-long-lines.md)
LINE_MEMORY_FACTOR = 40


def large_groups_message(large: list[list[Unit]], batch_bytes: int, memory_limit: int | None = None) -> str:
    # every unit of such a batch belongs to one session group, named by its main session
    sizes = sorted(((sum(u.size for u in group), group[0].label or group[0].owner) for group in large), reverse=True)
    biggest = sizes[0][0]
    listed = ", ".join(f"{owner} ({size / (1 << 20):,.1f} MiB)" for size, owner in sizes[:3])
    more = f" and {len(sizes) - 3} more" if len(sizes) > 3 else ""
    which = "1 session holds" if len(sizes) == 1 else f"{len(sizes)} sessions hold"
    memory = large_session_memory(biggest)
    available = available_memory()
    short = (
        f" This machine has about {size_text(available)} available: the conversion may run out of memory."
        if available is not None and memory > available else ""
    )
    stored = (
        f" A session of more than {LARGE_BATCH_BYTES >> 20} MiB is converted with DuckDB's memory limited to "
        f"{(memory_limit or LARGE_BATCH_MEMORY) >> 20} MiB (--memory-mb), beyond which its tables spill into the "
        f"output's run folder (the largest: up to about {size_text(LARGE_SESSION_DISK_FACTOR * biggest)} of disk), "
        "and in which a line of more than about "
        f"{largest_line(memory_limit or LARGE_BATCH_MEMORY) >> 20} MB does not fit unless most of it is in strings of "
        f"{elide.ELIDE_CHARS >> 20} MiB or more (a file read back, an image: those convert at any length): such a "
        "line is then rejected (rejects line_too_long, its bytes kept), the rest of its session converts, and the "
        "run goes on."
        if biggest > LARGE_BATCH_BYTES else ""
    )
    return (
        f"{which} more than the batch size ({batch_bytes >> 20} MiB) of transcripts, subagents included: "
        f"{listed}{more}. A session is never split across batches: each of these is converted alone, "
        f"and the largest needs roughly {size_text(memory)} of memory.{short}{stored}"
    )


def largest_line(memory_limit: int | None) -> int:
    """About the longest line that converts within DuckDB's `memory_limit` (None: LARGE_BATCH_MEMORY,
    the limit a large session converted alone has by default) when its length is not in
    strings long enough to be elided (transforms/elide.py): decoding a line's JSON
    (sql/batch/decode/observations.sql) takes up to LINE_MEMORY_FACTOR times its size (README, "Limits")."""
    return (memory_limit or LARGE_BATCH_MEMORY) // LINE_MEMORY_FACTOR


def size_text(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"


def large_session_memory(size: int) -> int:
    """Peak memory, about, of converting one session group of `size` bytes alone."""
    if size > LARGE_BATCH_BYTES:
        return LARGE_SESSION_MEMORY
    return BATCH_MEMORY_BASE + BATCH_MEMORY_FACTOR * size


def available_memory() -> int | None:
    """Memory the system can give without swapping (MemAvailable of /proc/meminfo), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_workers() -> int:
    """Batches converted at once by default: one per CPU, at most DEFAULT_WORKERS."""
    return max(1, min(os.cpu_count() or 1, DEFAULT_WORKERS))


def connect(workers: int = 1, *, spill: Path, memory: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    if memory is not None:  # --memory-mb: the batch's limit, a large one's too (formats/claude_code/converter.py)
        sql.set_memory_limit(con, memory)
    # The CLI draws its own progress bar; DuckDB's would interleave with it.
    con.execute("set enable_progress_bar = false")
    # spill inside the run folder, not in a `.tmp` of the working directory
    con.execute("set temp_directory = $path", {"path": str(spill)})
    # concurrent batches share the CPUs
    con.execute(f"set threads = {max(1, (os.cpu_count() or 1) // workers)}")
    sql.define_macros(con)
    return con


def arrow_pool() -> None:
    """Make Arrow allocate from jemalloc (the system allocator where pyarrow has no jemalloc), unless
    ARROW_DEFAULT_MEMORY_POOL names a pool. pyarrow's default, mimalloc, keeps the pages of the
    Parquet writes and casts of each worker thread: two batches at once peaked about 80 MiB higher
    with it, at the same CPU seconds (docs/decisions/008-arrow-allocator.md)."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:
        pa.set_memory_pool(pa.system_memory_pool())


class Stopped(Exception):
    """A batch that was told to stop before it started."""


class Stop:
    """Tells running batches to stop: interrupts their DuckDB statements and fails their next write."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[duckdb.DuckDBPyConnection] = set()

    @contextmanager
    def watch(self, con: duckdb.DuckDBPyConnection):
        with self._lock:
            self._connections.add(con)
        try:
            if self.event.is_set():
                raise Stopped
            yield con
        finally:
            with self._lock:
                self._connections.discard(con)

    def set(self) -> None:
        self.event.set()
        with self._lock:
            for con in self._connections:
                con.interrupt()
