"""Claude Code archives: discover transcript files and load their lines columnar.

Layout (registry entry, Identity): `<project>/<sessionId>.jsonl` main transcripts; subagents
either flat beside them (`agent-<id>.jsonl`, 2.0.x) or nested under
`<sessionId>/subagents/**/agent-<id>.jsonl` with an `agent-<id>.meta.json` sidecar (2.1.x);
inline `isSidechain` turns inside the main file (1.0.x) are split later, from the records.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import duckdb
import pyarrow as pa

from batch import sql
from batch.errors import SourceError
from batch.sources.base import COMPRESSED, Loaded, Stream, decompressed_size, open_file
from batch.sources.files import SCHEMA as FILES_SCHEMA
from batch.sources.files import FileTable
from batch.sources.skipped import Skipped
from batch.sources.walk import WALK_SLICE, Spool, Stat, Walk, display, root_names, walk

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")
ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
PEEK_LINES = 8
PEEK_BYTES = 1 << 16
BOM = b"\xef\xbb\xbf"
# Codex's temporary files beside its rollouts: the compressor's and the decompressor's (codex-format.md §14.2)
CODEX_TEMPORARY_RE = re.compile(r"^rollout-.*\.tmp$")
CODEX_TEMPORARY = "Codex's temporary file (a rollout being compressed or decompressed), not a transcript"


@dataclass
class Discovery:
    """What discovery found: files to convert and paths it looked at but did not convert."""

    # the transcripts, a row each with what its head said, held in files (`sources/files.py`); the
    # heads an incremental run keeps in the reuse state (see `discover`'s `known`)
    files: FileTable = field(default_factory=FileTable)
    skipped: Skipped = field(init=False)  # (path, why), in files beside the table's
    # the names of the files under tool-results/, sorted, once each: a file of JSON lines (`_distinct`)
    tool_result_names: Path | None = None
    roots: list[Path] = field(default_factory=list)  # the sources, resolved

    def __post_init__(self) -> None:
        self.skipped = Skipped(lambda: self.files.folder)


@dataclass(frozen=True)
class ToolResults:
    """The names of the tool-results/ files a run found, which its transcripts' persisted outputs
    point to: a file of the run folder that each batch's DuckDB reads, not a set held by the run and
    pickled into every task (docs/performance.md, "A cluster run, on paper"). JSON lines written a name
    at a time: pyarrow's Parquet writer would keep memory in the process (decisions/022)."""

    path: str | None  # None: none found
    # what every batch's conversion depends on beyond its own files: the SHA-256 of the sorted names
    key: str

    @classmethod
    def write(cls, folder: Path | None, *names: Iterable[str]) -> ToolResults:
        """Hold the names of every iterable of `names` (each sorted) in `folder`/tool-results.jsonl, sorted,
        once each, a name at a time (none when there are none)."""
        key, path, fh, last = hashlib.sha256(), None, None, None
        try:
            for name in heapq.merge(*names):
                if name == last:
                    continue
                if fh is None:
                    path = folder / "tool-results.jsonl"
                    fh = path.open("w", encoding="utf-8")
                key.update(name.encode() if last is None else f"\n{name}".encode())  # (the names' lines joined)
                fh.write(json.dumps({"name": name}) + "\n")
                last = name
        finally:
            if fh is not None:
                fh.close()
        return cls(None if path is None else str(path), key.hexdigest())

    @staticmethod
    def read(path: Path | str | None) -> Iterator[str]:
        """The names a file of them (as `write` and discovery write it) holds, in its order."""
        if path is not None:
            with open(path, encoding="utf-8") as fh:
                yield from (json.loads(line)["name"] for line in fh)

    def register(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        """Make the names readable as `name` (one column, `name`) on `con`."""
        source = "(select ''::varchar as name where false)" if self.path is None else (
            f"read_json({sql.quote(self.path)}, format = 'newline_delimited', columns = {{name: 'VARCHAR'}})")
        con.execute(f"create or replace temp view {name} as select name from {source}")


NO_TOOL_RESULTS = ToolResults.write(None)


def default_source() -> Path:
    """Return `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(base) / "projects" if base else Path.home() / ".claude" / "projects"


def discover(
    sources: list[Path], *, known: Iterable[tuple[str, object]] | None = None, files: FileTable | None = None,
) -> Discovery:
    """Find transcript files under each source path (a folder or a file).

    Every file below a source is either a transcript to convert or listed in `skipped` with the
    reason, and so is every folder that cannot be read or that a symbolic link loop leads back to.
    A file is classified (main or subagent, its session) by its path and the IDs in its first lines;
    `known` (a previous discovery's `heads`, as (name, entry) items) gives those IDs for files whose name,
    size and modification time are the same, as make and rsync compare files, so their heads are not
    read again: it is spooled beside the walk and joined with it (a run holds no head per file). The
    files are added to `files` (a table of its own when None).
    """
    found = Discovery(FileTable() if files is None else files)
    for src in sources:
        if not os.path.lexists(src):
            raise SourceError(f"{src}: no such file or folder. Pass a Claude Code projects folder or .jsonl files.")
        try:
            root = src.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise SourceError(f"{src}: cannot be resolved ({getattr(exc, 'strerror', None) or exc}). Check the path.") from exc
        if root not in found.roots:
            found.roots.append(root)
    # Paths below a root are held as text, not as Path objects: a Path per file costs several times
    # its text, and its parts stay in Python's table of interned strings (docs/performance.md, "A
    # cluster run, on paper"). The walk is spooled, then read back in its order with the head each file had.
    walked = Walk(found.files.folder)
    try:
        for root, prefix in zip(found.roots, root_names(found.roots)):
            for entry in walk(root, prefix):
                walked.add(*entry)
    finally:
        walked.close()
    # the sidecars and the compressed transcripts, resolved once every plain transcript is known; the
    # names of the persisted tool results
    beside = Spool(found.files.folder, "beside", _BESIDE)
    tool_results = Spool(found.files.folder, "tool-results", pa.schema([("name", pa.string())]))
    for path, name, folders, problem, st, copy_of, seen in walked.entries(known):
        if problem:
            found.skipped.append((name, problem))
            continue
        if copy_of is not None:
            found.skipped.append((name, f"same file as {copy_of}"))
            continue
        filename = os.path.basename(path)
        if "tool-results" in folders:
            tool_results.add({"name": display(filename)})
            found.skipped.append((name, "persisted tool result: its presence is evidence, its text is not converted"))
            continue
        if filename.endswith(".meta.json"):
            beside.add({"path": os.fsencode(path), "name": name,
                        "transcript": os.fsencode(path[: -len(".meta.json")] + ".jsonl")})
            continue
        suffix = _suffix(filename)
        if suffix in COMPRESSED and filename.endswith(".jsonl" + suffix):
            beside.add({"path": os.fsencode(path), "name": name, "plain": name[: -len(suffix)], "suffix": suffix,
                        "size": st.st_size, "mtime_ns": st.st_mtime_ns, "head": None if seen is None else json.dumps(seen)})
            continue
        if suffix != ".jsonl":
            found.skipped.append((name, CODEX_TEMPORARY if CODEX_TEMPORARY_RE.match(filename) else "not a .jsonl file"))
            continue
        if filename == "journal.jsonl" and "workflows" in folders:
            found.skipped.append((name, "workflow run journal, not a transcript"))
            continue
        try:
            found.files.add(*_classify(path, name, st, seen))
        except OSError as exc:
            found.skipped.append((name, f"cannot be read ({exc.strerror})"))
    beside.close()
    tool_results.close()
    try:
        _resolve_beside(found, beside, walked.con)
        found.tool_result_names = _distinct(tool_results, found.files.folder / "tool-results-found.jsonl", walked.con)
    finally:
        walked.remove()
        beside.remove()
        tool_results.remove()
    return found


def _distinct(names: Spool, path: Path, con: Callable[[], duckdb.DuckDBPyConnection]) -> Path | None:
    """Write to `path` the names `names` holds, sorted, once each (JSON lines: `ToolResults`), with the
    DuckDB `con()`; None when there are none."""
    if not names.count:
        return None
    duck = con()
    with names.reader() as given:
        duck.register("names_spool", given)
        duck.execute("create temp table names_once as select distinct name from names_spool")
        duck.unregister("names_spool")
    with path.open("w", encoding="utf-8") as fh:
        for batch in duck.sql("select name from names_once order by name").to_arrow_reader(batch_size=WALK_SLICE):
            fh.writelines(json.dumps({"name": name}) + "\n" for name in batch.column(0).to_pylist())
    duck.execute("drop table names_once")
    return path


# a sidecar (its transcript's path) or a compressed transcript (its plain form's name, its stat and head)
_BESIDE = pa.schema([
    ("path", pa.binary()), ("name", pa.string()), ("transcript", pa.binary()), ("plain", pa.string()),
    ("suffix", pa.string()), ("size", pa.int64()), ("mtime_ns", pa.int64()), ("head", pa.string()),
])


def _resolve_beside(found: Discovery, beside: Spool, con: Callable[[], duckdb.DuckDBPyConnection]) -> None:
    """Skip the sidecars without their transcript, then add the compressed transcripts (Codex's
    `rollout-*.jsonl.zst`), each named as its plain form (the name without `.zst`): a file compressed or
    decompressed between runs is the same file. When both forms are there (Codex leaves them together for
    a moment), the plain one is read, as Codex does (codex-format.md §14.2). Both are told by queries of
    the plain transcripts found on the DuckDB `con()`, in the order the walk gave them."""
    if not beside.count:
        return
    plain = pa.RecordBatchReader.from_batches(
        pa.schema([FILES_SCHEMA.field(c) for c in ("name", "path", "codec")]), found.files.batches(["name", "path", "codec"]))
    duck = con()
    with beside.reader() as given:
        duck.register("files_spool", plain)
        duck.register("beside_spool", given)
        duck.execute("create temp table plain as select name, path from files_spool where codec is null")
        duck.execute("create temp table beside as select * from beside_spool")
        duck.unregister("files_spool")
        duck.unregister("beside_spool")
    for batch in duck.sql("select name from beside b where transcript is not null"
                          " and not exists (select 1 from plain p where p.path = b.transcript)").to_arrow_reader(
            batch_size=WALK_SLICE):
        found.skipped += [(name, "sidecar without its transcript") for name in batch.column(0).to_pylist()]
    duck.execute("""create temp table compressed as
        select b.*, exists (select 1 from plain p where p.name = b.plain) as read_plain
        from beside b where plain is not null""")
    duck.execute("drop table plain; drop table beside")
    for batch in duck.sql("select * from compressed order by i").to_arrow_reader(batch_size=WALK_SLICE):
        for row in batch.to_pylist():
            path, name, logical, suffix = os.fsdecode(row["path"]), row["name"], row["plain"], row["suffix"]
            if row["read_plain"]:
                found.skipped.append((name, f"compressed copy of {logical}, which is read instead"))
                continue
            seen = None if row["head"] is None else json.loads(row["head"])
            try:
                found.files.add(*_classify(path[: -len(suffix)], logical, Stat(row["size"], row["mtime_ns"]), seen,
                                           source=path, codec=COMPRESSED[suffix]))
            except OSError as exc:
                found.skipped.append((name, f"cannot be read ({exc.strerror})"))
    duck.execute("drop table compressed")


def _suffix(name: str) -> str:
    """The last suffix of a file name (".zst" of "a.jsonl.zst"), as `Path.suffix` gives it."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def _classify(
    path: str, name: str, st: Stat, seen: list | None, *, source: str | None = None,
    codec: str | None = None,
) -> tuple[Stream, tuple[str | None, str | None]]:
    """The stream of the transcript at `path`, shown as `name`, and the agent and session IDs its head
    names (those of `seen`, its entry of a previous discovery's heads, when it is of the same size and
    time); a compressed one is read from `source`, its size that of its decompressed bytes (read
    through once here)."""
    source = source or path
    size = decompressed_size(source, codec) if codec else st.st_size
    if head_unchanged(seen, size, st.st_mtime_ns):
        os.close(os.open(source, os.O_RDONLY))  # the file can still be opened (its mode may have changed)
        agent_id, session_id = seen[2], seen[3]
    else:
        agent_id, session_id = head_ids(_head(source, codec))  # also proves the file can be opened
    sidecar = path[: -len(".jsonl")] + ".meta.json"
    stream = classify(path, name, size, agent_id, session_id, partial(_read_sidecar, sidecar), path=source,
                      mtime_ns=st.st_mtime_ns, codec=codec)
    return stream, (agent_id, session_id)


def classify(
    where: str, name: str, size: int, agent_id: str | None, session_id: str | None,
    sidecar: Callable[[], str | None], **stream,
) -> Stream:
    """The stream of a transcript at `where` (its path, `/`-separated: file name, `subagents/` folders)
    shown as `name`, from the IDs its head holds (`head_ids`); `sidecar()` gives a subagent's .meta.json text."""
    parts = _parts(where)
    filename = display(parts[-1] if parts else "")
    agent_match = AGENT_FILE_RE.match(filename)
    if agent_match or agent_id:
        agent_id = agent_id or agent_match.group(1)
        parent = _subagents_owner(parts) if "subagents" in parts else None
        parent = parent or session_id
        key = f"{parent}/{agent_id}" if parent else f"agent-{agent_id}"
        return Stream(name, size, "subagent", agent_id, key, parent, agent_id, sidecar(), **stream)
    stem = filename[: -len(".jsonl")]
    if session_id != stem:  # (when they are the same, the head's string: one object where the heads hold it too)
        session_id = stem if UUID_RE.match(stem) else (session_id or stem)
    return Stream(name, size, "main", session_id, session_id, **stream)


def head_ids(head: bytes) -> tuple[str | None, str | None]:
    """The agent ID and session ID that the first lines of a transcript (its first PEEK_BYTES) name."""
    objects = _peek(head)
    agent_id = next((o["agentId"] for o in objects if _is_id(o.get("agentId"))), None)
    session_id = next((o["sessionId"] for o in objects if _is_id(o.get("sessionId"))), None)
    return agent_id, session_id


def head_unchanged(seen: object, size: int, mtime_ns: int) -> bool:
    """Whether `seen`, a file's entry of a previous discovery's `heads`, is of this size and modification time."""
    return (
        isinstance(seen, list) and len(seen) == 4 and seen[:2] == [size, mtime_ns]
        and all(v is None or _is_id(v) for v in seen[2:])
    )


def _is_id(value: object) -> bool:
    # an ID read from a line names files and keys: anything else is ignored here (the line keeps it)
    return isinstance(value, str) and ID_RE.match(value) is not None


def _parts(path: str) -> list[str]:
    """A path's components as `PurePosixPath.parts` gives them ("/" first for an absolute path)."""
    parts = [p for p in path.split("/") if p and p != "."]
    return ["/", *parts] if path.startswith("/") else parts


def _subagents_owner(parts: list[str]) -> str | None:
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "subagents":
            return display(parts[i - 1])
    return None


def _head(path: str, codec: str | None) -> bytes:
    with open_file(path, codec) as fh:
        return fh.read(PEEK_BYTES)


def _peek(head: bytes) -> list[dict]:
    out = []
    for raw in head.removeprefix(BOM).split(b"\n")[:PEEK_LINES]:
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _read_sidecar(path: str) -> str | None:
    # A missing or corrupt sidecar is treated as absent (claude-code-format.md 1.4); the text is kept as is.
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def load_files(files: tuple[Stream, ...]) -> Loaded:
    """A unit's streams as they are: files are read when the batch converts them."""
    return Loaded(list(files))
