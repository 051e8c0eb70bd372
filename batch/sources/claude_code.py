"""Claude Code archives: discover transcript files and load their lines columnar.

Layout (registry entry, Identity): `<project>/<sessionId>.jsonl` main transcripts; subagents
either flat beside them (`agent-<id>.jsonl`, 2.0.x) or nested under
`<sessionId>/subagents/**/agent-<id>.jsonl` with an `agent-<id>.meta.json` sidecar (2.1.x);
inline `isSidechain` turns inside the main file (1.0.x) are split later, from the records.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow as pa

from batch import sql
from batch.errors import SourceError
from batch.sources.base import COMPRESSED, Loaded, Stream, decompressed_size, open_file
from batch.sources.files import FileTable
from batch.sources.skipped import Skipped

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")
ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
PEEK_LINES = 8
PEEK_BYTES = 1 << 16
BOM = b"\xef\xbb\xbf"
# Codex's temporary files beside its rollouts: the compressor's and the decompressor's (codex-format.md §14.2)
CODEX_TEMPORARY_RE = re.compile(r"^rollout-.*\.tmp$")
CODEX_TEMPORARY = "Codex's temporary file (a rollout being compressed or decompressed), not a transcript"
WALK_SLICE = 1024  # a walk's entries held before they are written to its spool (about 0.5 MB)
WALK_MEMORY = 64 << 20  # the DuckDB that finds the files several paths reach: it spills beyond


@dataclass
class Discovery:
    """What discovery found: files to convert and paths it looked at but did not convert."""

    # the transcripts, a row each with what its head said, held in files (`sources/files.py`); the
    # heads an incremental run keeps in the reuse state (see `discover`'s `known`)
    files: FileTable = field(default_factory=FileTable)
    skipped: Skipped = field(init=False)  # (path, why), in files beside the table's
    # names of files under tool-results/, while discovering: then in a file (`ToolResults`)
    tool_result_files: set[str] = field(default_factory=set)
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
    def write(cls, folder: Path | None, names: set[str]) -> ToolResults:
        """Hold `names` in `folder`/tool-results.jsonl (none when there are none)."""
        ordered, key = sorted(names), hashlib.sha256()
        for n, name in enumerate(ordered):  # (the names' lines joined)
            key.update(f"\n{name}".encode() if n else name.encode())
        if not ordered:
            return cls(None, key.hexdigest())
        path = folder / "tool-results.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps({"name": name}) + "\n" for name in ordered)
        return cls(str(path), key.hexdigest())

    def register(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        """Make the names readable as `name` (one column, `name`) on `con`."""
        source = "(select ''::varchar as name where false)" if self.path is None else (
            f"read_json({sql.quote(self.path)}, format = 'newline_delimited', columns = {{name: 'VARCHAR'}})")
        con.execute(f"create or replace temp view {name} as select name from {source}")


NO_TOOL_RESULTS = ToolResults.write(None, set())


def default_source() -> Path:
    """Return `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(base) / "projects" if base else Path.home() / ".claude" / "projects"


def display(text: str) -> str:
    """A path as shown in the outputs: bytes that are not UTF-8 become `\\xNN` escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def discover(sources: list[Path], *, known: dict[str, list] | None = None, files: FileTable | None = None) -> Discovery:
    """Find transcript files under each source path (a folder or a file).

    Every file below a source is either a transcript to convert or listed in `skipped` with the
    reason, and so is every folder that cannot be read or that a symbolic link loop leads back to.
    A file is classified (main or subagent, its session) by its path and the IDs in its first lines;
    `known` (a previous discovery's `heads`) gives those IDs for files whose name, size and
    modification time are the same, as make and rsync compare files, so their heads are not read again;
    each entry used is taken out of `known`, which then holds only those of the files changed or not
    found (a run holds no head per unchanged file). The files are added to `files` (a table of its own when None).
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
    # cluster run, on paper"). The walk is spooled, then read back in its order.
    walked = _Walk(found.files.folder)
    try:
        for root, prefix in zip(found.roots, _root_names(found.roots)):
            for entry in _walk(root, prefix):
                walked.add(*entry)
    finally:
        walked.close()
    shared = walked.shared()
    first: dict[bytes, str] = {}  # each real file more than one path reaches: the name it was first reached by
    sidecars: dict[str, str] = {}
    compressed: list[tuple[str, str, _Stat, str]] = []  # (path, shown name, stat, suffix)
    for path, name, folders, problem, st, real in walked.entries():
        if problem:
            found.skipped.append((name, problem))
            continue
        if real in shared:
            if real in first:
                found.skipped.append((name, f"same file as {first[real]}"))
                continue
            first[real] = name
        filename = os.path.basename(path)
        if "tool-results" in folders:
            found.tool_result_files.add(display(filename))
            found.skipped.append((name, "persisted tool result: its presence is evidence, its text is not converted"))
            continue
        if filename.endswith(".meta.json"):
            sidecars[path] = name
            continue
        suffix = _suffix(filename)
        if suffix in COMPRESSED and filename.endswith(".jsonl" + suffix):
            compressed.append((path, name, st, suffix))
            continue
        if suffix != ".jsonl":
            found.skipped.append((name, CODEX_TEMPORARY if CODEX_TEMPORARY_RE.match(filename) else "not a .jsonl file"))
            continue
        if filename == "journal.jsonl" and "workflows" in folders:
            found.skipped.append((name, "workflow run journal, not a transcript"))
            continue
        try:
            found.files.add(*_classify(path, name, st, known or {}))
        except OSError as exc:
            found.skipped.append((name, f"cannot be read ({exc.strerror})"))
    walked.remove()
    _add_compressed(found, compressed, known or {})
    if known is not None:  # what is left of it in a table of its own size (a dict keeps its table as entries go)
        left = dict(known)
        known.clear()
        known.update(left)
    if sidecars:
        beside = {path[: -len(".meta.json")] + ".jsonl": name for path, name in sidecars.items()}
        given = {os.fsencode(path) for path in beside}
        plain = {os.fsdecode(row["path"]) for row in found.files.among("path", given, ["path", "codec"]) if row["codec"] is None}
        found.skipped += [(name, "sidecar without its transcript") for path, name in beside.items() if path not in plain]
    return found


def _add_compressed(found: Discovery, compressed: list, known: dict[str, list]) -> None:
    """Add the compressed transcripts (Codex's `rollout-*.jsonl.zst`), each named as its plain form
    (the name without `.zst`): a file compressed or decompressed between runs is the same file. When
    both forms are there (Codex leaves them together for a moment), the plain one is read, as Codex
    does (codex-format.md §14.2)."""
    if not compressed:
        return
    plain = {row["name"] for row in found.files.among("name", {name[: -len(suffix)] for _, name, _, suffix in compressed}, ["name"])}
    for path, name, st, suffix in compressed:
        logical = name[: -len(suffix)]
        if logical in plain:
            found.skipped.append((name, f"compressed copy of {logical}, which is read instead"))
            continue
        try:
            found.files.add(*_classify(path[: -len(suffix)], logical, st, known, source=path, codec=COMPRESSED[suffix]))
        except OSError as exc:
            found.skipped.append((name, f"cannot be read ({exc.strerror})"))


def _root_names(roots: list[Path]) -> list[str]:
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


class _Stat(NamedTuple):
    """What discovery uses of a file's stat."""

    st_size: int
    st_mtime_ns: int


class _Walk:
    """A walk's entries (`_walk`'s), spooled in order to an Arrow IPC stream in `folder` a slice at a
    time and read back in that order, and the real files that more than one of them reaches (symbolic
    links, a source inside another), found by a DuckDB query over the spool: discovery holds a slice of
    entries and the first names of those files, not a record of every real path it saw
    (docs/performance.md, "A cluster run, on paper")."""

    SCHEMA = pa.schema([
        ("path", pa.binary()), ("name", pa.string()), ("folders", pa.list_(pa.binary())), ("problem", pa.string()),
        ("size", pa.int64()), ("mtime_ns", pa.int64()),
        ("real", pa.binary(16)),  # the BLAKE2b digest of its real path; null for a problem
    ])

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"walk-{uuid.uuid4().hex[:12]}.arrows"
        self.pending: list[dict] = []
        self.sink = pa.OSFile(str(self.path), "wb")
        self.writer = pa.ipc.new_stream(self.sink, self.SCHEMA)

    def add(self, path: str, name: str, folders: tuple[str, ...], problem: str | None, st: os.stat_result | None) -> None:
        real = None if problem else hashlib.blake2b(os.fsencode(os.path.realpath(path)), digest_size=16).digest()
        self.pending.append({
            "path": os.fsencode(path), "name": name, "folders": [os.fsencode(f) for f in folders], "problem": problem,
            "size": None if st is None else st.st_size, "mtime_ns": None if st is None else st.st_mtime_ns, "real": real,
        })
        if len(self.pending) >= WALK_SLICE:
            self._write()

    def _write(self) -> None:
        if self.pending:
            self.writer.write_batch(pa.RecordBatch.from_pylist(self.pending, schema=self.SCHEMA))
            self.pending = []

    def close(self) -> None:
        try:
            self._write()
        finally:
            self.writer.close()
            self.sink.close()

    def shared(self) -> set[bytes]:
        """The real files that more than one entry reaches (their digests)."""
        with (duckdb.connect(config={"memory_limit": f"{WALK_MEMORY >> 20}MiB", "temp_directory": str(self.path.parent)})
              as con, pa.memory_map(str(self.path)) as source):
            con.register("walk", pa.ipc.open_stream(source))
            return {real for real, in con.sql(
                "select real from walk where real is not null group by real having count(*) > 1").fetchall()}

    def entries(self) -> Iterator[tuple[str, str, tuple[str, ...], str | None, _Stat | None, bytes | None]]:
        """(path, shown name, folders below the root, problem or None, stat or None, real) of each entry, in order."""
        with pa.memory_map(str(self.path)) as source:
            for batch in pa.ipc.open_stream(source):
                for row in batch.to_pylist():
                    yield (
                        os.fsdecode(row["path"]), row["name"], tuple(os.fsdecode(f) for f in row["folders"]),
                        row["problem"], None if row["size"] is None else _Stat(row["size"], row["mtime_ns"]), row["real"],
                    )

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _walk(root: Path, prefix: str):
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


def _suffix(name: str) -> str:
    """The last suffix of a file name (".zst" of "a.jsonl.zst"), as `Path.suffix` gives it."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


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


def _classify(
    path: str, name: str, st: _Stat, known: dict[str, list], *, source: str | None = None,
    codec: str | None = None,
) -> tuple[Stream, tuple[str | None, str | None]]:
    """The stream of the transcript at `path`, shown as `name`, and the agent and session IDs its head
    names; a compressed one is read from `source`, its size that of its decompressed bytes (read
    through once here)."""
    source = source or path
    size = decompressed_size(source, codec) if codec else st.st_size
    seen = known.get(name)
    if head_unchanged(seen, size, st.st_mtime_ns):
        os.close(os.open(source, os.O_RDONLY))  # the file can still be opened (its mode may have changed)
        agent_id, session_id = seen[2], seen[3]
        del known[name]
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
