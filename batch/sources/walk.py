"""Discovery's walk: every file below the sources, spooled in order to Arrow IPC files in the run folder
and read back in that order, with DuckDB queries over the spools (the files several paths reach, a
previous discovery's heads joined by name), so that discovery holds a slice of entries rather than a
record per file (docs/performance.md, "A cluster run, on paper")."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow as pa

from batch import sql
from batch.sources.base import COMPRESSED

WALK_SLICE = 1024  # a walk's entries held before they are written to its spool (about 0.5 MB)
# discovery's DuckDB, which joins and sorts its spools: it spills beyond (docs/performance.md)
WALK_MEMORY = 256 << 20


def display(text: str) -> str:
    """A path as shown in the outputs: bytes that are not UTF-8 become `\\xNN` escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def root_names(roots: list[Path]) -> list[str]:
    """How each source is named in the outputs: its last path component, or as many more of its
    parents as it takes to tell sources with the same name apart (`a/proj`, `b/proj`)."""
    depth = [1] * len(roots)

    def name(i: int) -> str:
        parts = roots[i].parts
        return display("/".join(parts[-depth[i]:]).lstrip("/")) or "/"

    while True:
        names = [name(i) for i in range(len(roots))]
        clashes = [i for i, n in enumerate(names) if names.count(n) > 1 and depth[i] < len(roots[i].parts)]
        if not clashes:
            return names
        for i in clashes:
            depth[i] += 1


class Stat(NamedTuple):
    """What discovery uses of a file's stat."""

    st_size: int
    st_mtime_ns: int


class Spool:
    """Rows spooled in order to an Arrow IPC stream in `folder` a slice at a time, each numbered by its
    place (`i`), and read back from the file a slice at a time (not memory-mapped: the file's pages
    would count in the process's memory as they are read)."""

    def __init__(self, folder: Path, kind: str, schema: pa.Schema) -> None:
        self.path = folder / f"{kind}-{uuid.uuid4().hex[:12]}.arrows"
        self.schema = pa.schema([("i", pa.int64()), *schema])
        self.pending: list[dict] = []
        self.count = 0
        self.sink = pa.OSFile(str(self.path), "wb")
        self.writer = pa.ipc.new_stream(self.sink, self.schema)

    def add(self, row: dict) -> None:
        row["i"] = self.count
        self.pending.append(row)
        self.count += 1
        if len(self.pending) >= WALK_SLICE:
            self._write()

    def _write(self) -> None:
        if self.pending:
            self.writer.write_batch(pa.RecordBatch.from_pylist(self.pending, schema=self.schema))
            self.pending = []

    def close(self) -> None:
        try:
            self._write()
        finally:
            self.writer.close()
            self.sink.close()

    @contextlib.contextmanager
    def reader(self) -> Iterator[pa.RecordBatchStreamReader]:
        with pa.OSFile(str(self.path)) as source:
            yield pa.ipc.open_stream(source)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def connect(folder: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB for discovery's queries over its spools, spilling into `folder` beyond `WALK_MEMORY`. Its
    joins read DuckDB's tables and its sorts a join's result once it is a table: a join of Arrow
    streams, or a join and a sort in one statement, could not spill from 1 to 6 million files
    (`bench/discovery_spools.py`)."""
    return duckdb.connect(config={"memory_limit": f"{WALK_MEMORY >> 20}MiB", "temp_directory": str(folder)})


class Walk:
    """A walk's entries (`walk`'s), spooled in order (`Spool`) and read back in that order; DuckDB
    queries over the spool find the entries that reach a real file an entry before them reached
    (symbolic links, a source inside another) and the name of that entry. Discovery holds a slice of
    entries, not a record of every real path it saw. A previous discovery's heads are spooled beside it
    the same way and joined with it by name (docs/performance.md, "A cluster run, on paper")."""

    SCHEMA = pa.schema([
        ("path", pa.binary()), ("name", pa.string()), ("folders", pa.list_(pa.binary())), ("problem", pa.string()),
        ("size", pa.int64()), ("mtime_ns", pa.int64()),
        ("real", pa.binary(16)),  # the BLAKE2b digest of its real path; null for a problem
    ])
    # a head's entry (`FileTable.heads`): size, modification time, agent ID, session ID
    HEADS = pa.schema([("name", pa.string()), ("size", pa.int64()), ("mtime_ns", pa.int64()),
                       ("agent", pa.string()), ("session", pa.string())])

    def __init__(self, folder: Path) -> None:
        self.spool = Spool(folder, "walk", self.SCHEMA)
        self.heads: Spool | None = None
        self._con: duckdb.DuckDBPyConnection | None = None

    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB of this discovery's queries (`connect`), made when first wanted."""
        if self._con is None:
            self._con = connect(self.spool.path.parent)
        return self._con

    def add(self, path: str, name: str, folders: tuple[str, ...], problem: str | None, st: os.stat_result | None) -> None:
        real = None if problem else hashlib.blake2b(os.fsencode(os.path.realpath(path)), digest_size=16).digest()
        self.spool.add({
            "path": os.fsencode(path), "name": name, "folders": [os.fsencode(f) for f in folders], "problem": problem,
            "size": None if st is None else st.st_size, "mtime_ns": None if st is None else st.st_mtime_ns, "real": real,
        })

    def close(self) -> None:
        self.spool.close()

    def entries(
        self, known: Iterable[tuple[str, object]] | None = None,
    ) -> Iterator[tuple[str, str, tuple[str, ...], str | None, Stat | None, str | None, list | None]]:
        """(path, shown name, folders below the root, problem or None, stat or None, copy of, head or None) of
        each entry, in order: `copy of` is the name of the entry that first reached the same real file
        (None for the first); its head is its entry of `known` (a previous discovery's heads), by its name
        or, compressed, by its plain form's (of a name `known` gives twice, the last entry, as JSON keeps it)."""
        self._copies()
        tables = ["copies"]
        if known is not None:  # (no previous heads: no spool, no join)
            self._heads(known)
            tables.append("matched")
        con = self.con()
        # (the two tables' rows by place in the walk, in one sort: a connection streams one result at a time)
        found = con.sql(
            "select i, name, null as j, null as size, null as mtime_ns, null as agent, null as session from copies"
            + (" union all select i, null, j, size, mtime_ns, agent, session from matched" if known is not None else "")
            + " order by i, j nulls first").to_arrow_reader(batch_size=WALK_SLICE)
        given = (row for batch in found for row in zip(*(column.to_pylist() for column in batch.columns)))
        nxt = next(given, None)
        with self.spool.reader() as walk:
            for batch in walk:
                for row in batch.to_pylist():
                    first = seen = None
                    while nxt is not None and nxt[0] == row["i"]:  # (a name the heads give twice: its last entry)
                        if nxt[1] is not None:
                            first = nxt[1]
                        else:
                            seen = list(nxt[3:])
                        nxt = next(given, None)
                    yield (
                        os.fsdecode(row["path"]), row["name"], tuple(os.fsdecode(f) for f in row["folders"]),
                        row["problem"], None if row["size"] is None else Stat(row["size"], row["mtime_ns"]),
                        first, seen,
                    )
        con.execute("; ".join(f"drop table {t}" for t in tables))

    def _copies(self) -> None:
        """Make the table `copies` (place in the walk, name of the first): the entries that reach a real
        file an entry before them reached."""
        con = self.con()
        # (a statement for each join and aggregate: `connect`)
        with self.spool.reader() as walk:
            con.register("walk_spool", walk)
            con.execute("create temp table reals as select i, name, real from walk_spool where real is not null")
            con.unregister("walk_spool")
        con.execute("create temp table firsts as select real, min(i) as first from reals group by real having count(*) > 1")
        con.execute("create temp table later as select r.i, f.first from reals r join firsts f using (real) where r.i > f.first")
        con.execute("create temp table copies as select l.i, r.name from later l join reals r on r.i = l.first")
        con.execute("drop table reals; drop table firsts; drop table later")

    def _heads(self, known: Iterable[tuple[str, object]]) -> None:
        """Make the table `matched` (place in the walk, place in `known`, size, time, agent ID, session ID):
        the entries of `known` an entry of the walk has, `known` spooled, then joined with the walk by name."""
        self.heads = Spool(self.spool.path.parent, "heads", self.HEADS)
        try:
            for name, seen in known:  # (an entry not shaped as a head is one of nulls: no file's)
                if _unicode(name):  # (else no name of the walk's)
                    self.heads.add(dict(zip(self.HEADS.names, (name, *(seen if _head_shaped(seen) else [None] * 4)))))
        finally:
            self.heads.close()
        con = self.con()
        plain = " ".join(f"when suffix(name, {sql.quote('.jsonl' + s)}) then left(name, length(name) - {len(s)})"
                         for s in COMPRESSED)
        # (DuckDB's tables first, and the join before the sort: `connect`)
        with self.spool.reader() as walk, self.heads.reader() as given:
            con.register("walk_spool", walk)
            con.register("heads_spool", given)
            con.execute(f"create temp table walk_names as select i, case {plain} else name end as name from walk_spool")
            con.execute("create temp table heads as select * from heads_spool")
            con.unregister("walk_spool")
            con.unregister("heads_spool")
        con.execute("""create temp table matched as
            select w.i, h.i as j, h.size, h.mtime_ns, h.agent, h.session from walk_names w join heads h using (name)""")
        con.execute("drop table walk_names; drop table heads")

    def remove(self) -> None:
        """Remove the spools and close the DuckDB."""
        if self._con is not None:
            self._con.close()
            self._con = None
        self.spool.remove()
        if self.heads is not None:
            self.heads.remove()


def _head_shaped(seen: object) -> bool:
    """Whether a head's entry is [size, time, ID or None, ID or None], its numbers within 64 bits (its IDs
    are checked when it is used: `head_unchanged`, which takes none that is not ASCII)."""
    return (isinstance(seen, list) and len(seen) == 4
            and all(isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63 for v in seen[:2])
            and all(v is None or isinstance(v, str) and v.isascii() for v in seen[2:]))


def _unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # (a lone surrogate, which JSON's escapes can give)
        return False
    return True


def walk(root: Path, prefix: str):
    """Yield (path, shown name, folders below the root, problem or None, stat or None) for every file
    below `root`, its path as text.

    Symbolic links to folders are followed once: a link back to a folder already visited is
    reported, not followed again. Files that are not regular (FIFOs, sockets, devices) are reported.
    """
    top = os.fspath(root)
    if not os.path.isdir(top):
        yield from _file_entry(top, prefix, ())
        return
    visited: dict[tuple[int, int], str] = {}
    problems: list[tuple[str, str]] = []

    def below(path: str) -> str:
        # a path below the root, relative to it ("" for the root itself); os.walk joins onto `top`
        return path[len(top):].lstrip(os.sep) if path.startswith(top) else os.path.relpath(path, top)

    def on_error(exc: OSError) -> None:
        rel = below(exc.filename) if exc.filename else ""
        problems.append((_shown(prefix, rel), f"folder cannot be read ({exc.strerror})"))

    for dirpath, dirnames, filenames in os.walk(top, followlinks=True, onerror=on_error):
        rel = below(dirpath)
        shown = _shown(prefix, rel)
        try:
            st = os.stat(dirpath)
        except OSError as exc:
            problems.append((shown, f"folder cannot be read ({exc.strerror})"))
            dirnames[:] = []
            continue
        key = (st.st_dev, st.st_ino)
        if key in visited:
            problems.append((shown, f"symbolic link loop: the same folder as {visited[key]}"))
            dirnames[:] = []
            continue
        visited[key] = shown
        # real folders before links to folders: a folder reached both ways keeps its own name
        dirnames.sort(key=lambda d: (os.path.islink(os.path.join(dirpath, d)), d))
        folders = tuple(rel.split(os.sep)) if rel else ()
        for filename in sorted(filenames):
            yield from _file_entry(os.path.join(dirpath, filename), _shown(prefix, f"{rel}/{filename}" if rel else filename), folders)
    for name, why in problems:
        yield top, name, (), why, None


def _shown(prefix: str, rel: str) -> str:
    return prefix if rel in ("", ".") else f"{prefix}/{display(rel)}"


def _file_entry(path: str, name: str, folders: tuple[str, ...]):
    try:
        st = os.stat(path)
    except OSError as exc:
        why = "broken symbolic link" if os.path.islink(path) else f"cannot be read ({exc.strerror})"
        yield path, name, folders, why, None
        return
    if not stat.S_ISREG(st.st_mode):
        yield path, name, folders, "not a regular file", st
        return
    yield path, name, folders, None, st
