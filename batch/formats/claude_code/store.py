"""Where the wide rows of a large batch wait between the converter's passes.

A batch larger than claude_code.STORE_BYTES (in practice one session group larger than a batch)
would hold its whole text several times over in Polars frames: the decoded observations from pass 1
until the end, and every chunk's records and parts from pass 2 until the fact tables have read
them. With a store, those rows are written to Parquet files in a folder of the connection's
temporary directory as each chunk makes them, and only narrow frames stay in memory. Each stored
table is a temporary view over its files, so the statements read it by the same name as the frame
it replaces, and DuckDB reads from the files only the columns and row groups a statement needs;
its memory limit is lowered while the store is open, so that its sorts and joins spill. The large
output tables are read back a piece at a time, sorted by merging the chunks' runs. The folder is
removed with the store.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq

from batch import sql

# DuckDB's memory limit while a store is open, so that its sorts and joins over the stored tables
# spill to the temporary directory instead of holding them (sql.release resets it).
STORE_MEMORY = 768 << 20
# The size of the frames a merge of sorted runs yields (Store.merged).
MERGE_BYTES = 64 << 20


class Store:
    """Tables of Parquet files that rows are appended to, a frame at a time, each read as a view."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        spill = Path(con.sql("select current_setting('temp_directory')").fetchall()[0][0])
        spill.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="store-", dir=spill))
        weakref.finalize(self, shutil.rmtree, self.folder, True)
        self.files: dict[str, list[Path]] = {}
        self.rows: dict[str, int] = {}
        limit = sql.memory_limit(con) or STORE_MEMORY  # --memory-mb, else STORE_MEMORY
        con.execute(f"set memory_limit = '{limit >> 20} MiB'")

    def append(self, table: str, frame: pl.DataFrame) -> None:
        """Add the rows of `frame` to `table`, a new file of it."""
        files = self.files.setdefault(table, [])
        path = self.folder / f"{table}-{len(files):05d}.parquet"
        # uncompressed: the file is read back within the batch; statistics let a read skip row groups
        frame.write_parquet(path, compression="uncompressed", statistics=True, row_group_size=16384)
        files.append(path)
        self.rows[table] = self.rows.get(table, 0) + frame.height
        listed = ", ".join(f"'{p}'" for p in files)
        self.con.execute(f'create or replace temp view "{table}" as select * from read_parquet([{listed}])')

    def copy(self, table: str, query: str) -> None:
        """Store the result of `query` as `table` (one file, written by DuckDB)."""
        self.drop(table)
        path = self.folder / f"{table}.parquet"
        self.con.execute(f"copy ({query}) to '{path}' (format parquet, compression uncompressed)")
        self.files[table] = [path]
        self.con.execute(f"create or replace temp view \"{table}\" as select * from read_parquet('{path}')")

    def drop(self, table: str) -> None:
        """Remove `table`: its view and its files."""
        self.con.execute(f'drop view if exists "{table}"')
        for path in self.files.pop(table, []):
            path.unlink()
        self.rows.pop(table, None)

    def scan(self, table: str) -> pl.LazyFrame:
        """The files of `table`, read by Polars."""
        return pl.scan_parquet(self.files[table])

    def merged(self, table: str, order: tuple[str, ...], columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
        """The rows of `table` (its `columns`, all when None) sorted by `order` (ascending, nulls
        last), rows with equal keys in the order they were appended, as frames of about
        MERGE_BYTES each. Each frame appended must be sorted so already (a run): the runs are merged
        from their key columns alone, and each frame of the result reads, from each run, the next
        rows it takes from it (a merge takes a run's rows in their order), not the whole table."""
        files = self.files.get(table, [])
        keys = pl.concat(
            [pl.scan_parquet(path).select(order).with_columns(run=pl.lit(i, pl.Int32)).collect() for i, path in enumerate(files)]
        ) if files else pl.DataFrame({"run": []}, schema={"run": pl.Int32})
        runs = keys.sort(order, nulls_last=True, maintain_order=True).get_column("run")
        del keys
        window = _rows_per_frame(runs.len(), sum(path.stat().st_size for path in files))
        taken = [0] * len(files)  # rows of each run already read
        for start in range(0, runs.len(), window):
            part = runs.slice(start, window)
            counts = dict(part.value_counts().iter_rows())
            # the rows this frame takes from each run, in run order, and where each run's rows begin
            frames, begins, at = [], {}, 0
            for run in sorted(counts):
                frame = pl.scan_parquet(files[run]).slice(taken[run], counts[run])
                frames.append((frame if columns is None else frame.select(columns)).collect())
                begins[run], at, taken[run] = at, at + counts[run], taken[run] + counts[run]
            # the k-th row of the frame taken from run r is that run's (number of earlier rows from r)-th
            rank = pl.int_range(pl.len(), dtype=pl.Int64).over("run")
            index = part.to_frame("run").select(pl.col("run").replace_strict(begins, return_dtype=pl.Int64) + rank)
            yield pl.concat(frames).gather(index.to_series())

    def read(self, table: str) -> Iterator[pl.DataFrame]:
        """The rows of `table` in the order they were stored, as frames of about MERGE_BYTES each."""
        for path in self.files.get(table, []):
            rows = pq.read_metadata(path).num_rows
            window = _rows_per_frame(rows, path.stat().st_size)
            for start in range(0, rows, window):
                yield pl.scan_parquet(path).slice(start, window).collect()


def _rows_per_frame(rows: int, size: int) -> int:
    """How many of `rows` rows stored in `size` bytes make a frame of about MERGE_BYTES (at least one)."""
    return max(1, MERGE_BYTES * max(1, rows) // max(1, size))


def register_classified(con: duckdb.DuckDBPyConnection, narrow: pl.DataFrame) -> None:
    """Register the keys of a store's observations (`store_keys`: their wide_row, the session_key,
    stream_kind and sidechain root of the sidechain split, and ord) and define `classified` over the
    store's `wide` rows with them, as the wide frame would be."""
    sql.register(con, "store_keys", narrow.select("wide_row", "session_key", "stream_kind", "sidechain_root", "ord"))
    classified_view(con, summary_content=False)


def classified_view(con: duckdb.DuckDBPyConnection, *, summary_content: bool) -> None:
    """The view `classified` of a store's observations (`wide` joined with `store_keys`); with
    `summary_content`, as the statements after pass 2 read it: message.content on compact summaries
    alone (see convert)."""
    content = ", case when w.is_compact_summary then w.content end as summary_content" if summary_content else ""
    con.execute(
        "create or replace temp view classified as "
        f"select w.* exclude (wide_row{', content' if summary_content else ''}) replace (k.session_key as session_key, "
        f"k.stream_kind as stream_kind, k.sidechain_root as sidechain_root), k.ord{content} "
        "from wide as w join store_keys as k using (wide_row)"
    )


def chunk_rows(store: Store, keys: pl.DataFrame) -> pl.DataFrame:
    """The rows of `classified` of a chunk's observations from the store (`keys`: their rows of the
    narrow frame, in its order), in that order."""
    wide_row = keys.get_column("wide_row")
    rows = (
        store.scan("wide")
        .filter(pl.col("wide_row").is_between(wide_row.min(), wide_row.max()))  # skips the other files' row groups
        .filter(pl.col("wide_row").is_in(wide_row.implode()))
        .drop("wide_row")
        .collect()
    )
    return rows.with_columns(keys.select("session_key", "stream_kind", "sidechain_root", "ord"))


def tool_calls(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """pass2.tool_calls over the store's records_full and batch_parts, as its table `batch_tool_calls`."""
    calls = sql.frame(con, "tool_calls")
    sql.register(con, "store_calls", calls.with_row_index("store_row"))
    store.copy(
        "batch_tool_calls",
        "select c.* exclude (call_part_index, store_row) replace ("
        "coalesce(c.input, p.tool_input) as input, coalesce(c.result_native, r.tool_use_result) as result_native) "
        "from store_calls as c "
        "left join batch_parts as p on p.session_key = c.session_key and p.record_id = c.call_record_id "
        "and p.part_index = c.call_part_index "
        "left join records_full as r on r.session_key = c.session_key and r.record_id = c.result_record_id "
        "order by c.store_row",
    )
    con.unregister("store_calls")
