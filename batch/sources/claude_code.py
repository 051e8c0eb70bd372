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
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from batch.errors import SourceError

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")
ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
PEEK_LINES = 8
PEEK_BYTES = 1 << 16
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class SourceFile:
    """One transcript file and the stream it holds."""

    path: Path
    name: str  # path shown in the outputs: <source root name>/<path below it>
    size: int
    stream_kind: str  # main | subagent
    session_id: str  # ASR session ID: sessionId (main) or agentId (subagent)
    session_key: str
    parent_session_id: str | None = None
    agent_id: str | None = None
    sidecar: str | None = None  # the .meta.json text, verbatim
    content_level: str = "full"
    producer_source: str = "claude-code-jsonl"


@dataclass
class Discovery:
    """What discovery found: files to convert and paths it looked at but did not convert."""

    files: list[SourceFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    tool_result_files: set[str] = field(default_factory=set)  # names of files under tool-results/
    roots: list[Path] = field(default_factory=list)  # the sources, resolved


def default_source() -> Path:
    """Return `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(base) / "projects" if base else Path.home() / ".claude" / "projects"


def display(text: str) -> str:
    """A path as shown in the outputs: bytes that are not UTF-8 become `\\xNN` escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def discover(sources: list[Path]) -> Discovery:
    """Find transcript files under each source path (a folder or a file).

    Every file below a source is either a transcript to convert or listed in `skipped` with the
    reason, and so is every folder that cannot be read or that a symbolic link loop leads back to.
    """
    found = Discovery()
    for src in sources:
        if not os.path.lexists(src):
            raise SourceError(f"{src}: no such file or folder. Pass a Claude Code projects folder or .jsonl files.")
        try:
            root = src.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise SourceError(f"{src}: cannot be resolved ({getattr(exc, 'strerror', None) or exc}). Check the path.") from exc
        if root not in found.roots:
            found.roots.append(root)
    seen: dict[Path, str] = {}
    sidecars: dict[Path, str] = {}
    for root, prefix in zip(found.roots, _root_names(found.roots)):
        for path, name, folders, problem in _walk(root, prefix):
            if problem:
                found.skipped.append((name, problem))
                continue
            real = path.resolve()
            if real in seen:
                found.skipped.append((name, f"same file as {seen[real]}"))
                continue
            seen[real] = name
            if "tool-results" in folders:
                found.tool_result_files.add(display(path.name))
                found.skipped.append((name, "persisted tool result: its presence is evidence, its text is not converted"))
                continue
            if path.name.endswith(".meta.json"):
                sidecars[path] = name
                continue
            if path.suffix != ".jsonl":
                found.skipped.append((name, "not a .jsonl file"))
                continue
            if path.name == "journal.jsonl" and "workflows" in folders:
                found.skipped.append((name, "workflow run journal, not a transcript"))
                continue
            try:
                found.files.append(_classify(path, name))
            except OSError as exc:
                found.skipped.append((name, f"cannot be read ({exc.strerror})"))
    transcripts = {f.path.with_name(f.path.name[: -len(".jsonl")] + ".meta.json") for f in found.files}
    for path, name in sidecars.items():
        if path not in transcripts:
            found.skipped.append((name, "sidecar without its transcript"))
    found.files.sort(key=lambda f: (f.session_key, f.name))
    return found


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


def _walk(root: Path, prefix: str):
    """Yield (path, shown name, folders below the root, problem or None) for every file below `root`.

    Symbolic links to folders are followed once: a link back to a folder already visited is
    reported, not followed again. Files that are not regular (FIFOs, sockets, devices) are reported.
    """
    if not root.is_dir():
        yield from _file_entry(root, prefix, ())
        return
    visited: dict[tuple[int, int], str] = {}
    problems: list[tuple[str, str]] = []

    def on_error(exc: OSError) -> None:
        rel = Path(exc.filename).relative_to(root).as_posix() if exc.filename else "."
        problems.append((_shown(prefix, rel), f"folder cannot be read ({exc.strerror})"))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=on_error):
        here = Path(dirpath)
        rel = here.relative_to(root)
        shown = _shown(prefix, rel.as_posix())
        try:
            st = here.stat()
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
        for filename in sorted(filenames):
            yield from _file_entry(here / filename, _shown(prefix, (rel / filename).as_posix()), rel.parts)
    for name, why in problems:
        yield root, name, (), why


def _shown(prefix: str, rel: str) -> str:
    return prefix if rel in ("", ".") else f"{prefix}/{display(rel)}"


def _file_entry(path: Path, name: str, folders: tuple[str, ...]):
    try:
        st = path.stat()
    except OSError as exc:
        why = "broken symbolic link" if path.is_symlink() else f"cannot be read ({exc.strerror})"
        yield path, name, folders, why
        return
    if not stat.S_ISREG(st.st_mode):
        yield path, name, folders, "not a regular file"
        return
    yield path, name, folders, None


def _classify(path: Path, name: str) -> SourceFile:
    size = path.stat().st_size
    head = _peek(path)  # also proves the file can be opened
    filename = display(path.name)
    agent_match = AGENT_FILE_RE.match(filename)
    agent_id = next((o["agentId"] for o in head if _is_id(o.get("agentId"))), None)
    session_ids = [o["sessionId"] for o in head if _is_id(o.get("sessionId"))]
    if agent_match or agent_id:
        agent_id = agent_id or agent_match.group(1)
        nested = path.parent.name == "subagents" or "subagents" in path.parts
        parent = _subagents_owner(path) if nested else None
        parent = parent or (session_ids[0] if session_ids else None)
        sidecar_path = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
        sidecar = _read_sidecar(sidecar_path)
        key = f"{parent}/{agent_id}" if parent else f"agent-{agent_id}"
        return SourceFile(path, name, size, "subagent", agent_id, key, parent, agent_id, sidecar)
    stem = filename[: -len(".jsonl")]
    session_id = stem if UUID_RE.match(stem) else (session_ids[0] if session_ids else stem)
    return SourceFile(path, name, size, "main", session_id, session_id)


def _is_id(value: object) -> bool:
    # an ID read from a line names files and keys: anything else is ignored here (the line keeps it)
    return isinstance(value, str) and ID_RE.match(value) is not None


def _subagents_owner(path: Path) -> str | None:
    parts = path.parts
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "subagents":
            return display(parts[i - 1])
    return None


def _peek(path: Path) -> list[dict]:
    with path.open("rb") as fh:
        head = fh.read(PEEK_BYTES)
    out = []
    for raw in head.removeprefix(BOM).split(b"\n")[:PEEK_LINES]:
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _read_sidecar(path: Path) -> str | None:
    # A missing or corrupt sidecar is treated as absent (claude-code-format.md 1.4); the text is kept as is.
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def group_owner(f: SourceFile) -> str:
    """The session group of a file: its parent session for a subagent, else its own stream."""
    return f.parent_session_id if f.stream_kind == "subagent" and f.parent_session_id else f.session_key


def batches(files: list[SourceFile], *, max_bytes: int) -> list[list[SourceFile]]:
    """Group files into batches of whole session groups (a main session with its subagents).

    A group larger than `max_bytes` is a batch of its own."""
    groups: dict[str, list[SourceFile]] = {}
    for f in files:
        groups.setdefault(group_owner(f), []).append(f)
    out: list[list[SourceFile]] = []
    current: list[SourceFile] = []
    size = 0
    for owner in sorted(groups):
        group = groups[owner]
        if current and size + sum(f.size for f in group) > max_bytes:
            out.append(current)
            current, size = [], 0
        current.extend(group)
        size += sum(f.size for f in group)
    if current:
        out.append(current)
    return out


LINE_SCHEMA = {
    "file_idx": pl.Int32,
    "line": pl.Int64,
    "byte_offset": pl.Int64,
    "byte_length": pl.Int64,
    "text": pl.String,
    "raw": pl.Binary,
    "utf8_ok": pl.Boolean,
    "has_newline": pl.Boolean,
}


@dataclass
class Loaded:
    """The lines of a batch's files, and what reading each file found."""

    lines: pl.DataFrame
    digests: list[Future[str]]  # sha256 of the bytes read, per file
    sizes: list[int]  # bytes read, per file: a file that grew since discovery is read as it was then
    boms: list[bool]  # the file began with a UTF-8 byte order mark, stripped from its first line
    errors: list[str | None]  # why a file could not be read (it then has no lines)


def read_lines(files: list[SourceFile], hasher: Executor | None = None) -> Loaded:
    """Split the files of a batch into physical lines with file index, 1-based line number and byte offset.

    All files are read into one buffer and split once in Arrow, never per line; only the lines of a
    file that is not valid UTF-8 are decoded one by one (with replacement characters; their raw
    bytes are kept). Each file's sha256 is computed on `hasher` when given, so hashing overlaps
    with the next steps (hashlib releases the GIL). A byte order mark is not part of the first
    line: its bytes are skipped (offsets stay those of the file).
    """
    buffer = bytearray(sum(f.size for f in files))
    view = memoryview(buffer)
    starts, digests, sizes, errors, position = [0], [], [], [], 0
    for f in files:
        got, error = 0, None
        try:
            with f.path.open("rb") as fh:
                # at most the size discovery saw: a live transcript that grows is read as it was
                got = fh.readinto(view[position : position + f.size]) or 0
        except OSError as exc:
            error = f"cannot be read ({exc.strerror})"
        chunk = view[position : position + got]
        digests.append(hasher.submit(_sha256, chunk) if hasher else _done(_sha256(chunk)))
        sizes.append(got)
        errors.append(error)
        position += got
        starts.append(position)
    boms = [buffer[a : a + 3] == BOM and b - a >= 3 for a, b in zip(starts, starts[1:])]
    if not position:
        return Loaded(pl.DataFrame(schema=LINE_SCHEMA), digests, sizes, boms, errors)
    # one Arrow value per file, over the same buffer; split once into lines
    per_file = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(files), [None, pa.array(starts, pa.int64()).buffers()[1], pa.py_buffer(view[:position])]
    )
    pieces = pc.split_pattern(per_file, pattern=b"\n")
    # a file ending in a newline (and an empty file) splits into one empty piece after its last line
    ends_newline = [a == b or buffer[b - 1] == 10 for a, b in zip(starts, starts[1:])]
    file_idx = pl.col("file_idx")
    at_bom = (pl.col("line") == 1) & pl.lit(pl.Series(boms, dtype=pl.Boolean)).gather(file_idx)
    frame = (
        pl.DataFrame(
            {
                "file_idx": pl.int_range(0, len(files), eager=True, dtype=pl.Int32)
                .repeat_by(pl.from_arrow(pc.list_value_length(pieces)).cast(pl.UInt32))
                .explode(),
                "raw": pl.from_arrow(pieces.flatten()).cast(pl.Binary),
            }
        )
        .with_columns(
            line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(file_idx),
            byte_length=pl.col("raw").bin.size().cast(pl.Int64),
            last=file_idx != file_idx.shift(-1, fill_value=-1),
        )
        .filter(~(pl.col("last") & pl.lit(pl.Series(ends_newline, dtype=pl.Boolean)).gather(file_idx)))
        .with_columns(
            byte_offset=(pl.col("byte_length") + 1).cum_sum().over(file_idx) - pl.col("byte_length") - 1,
            has_newline=~pl.col("last"),
        )
        .with_columns(
            raw=pl.when(at_bom).then(pl.col("raw").bin.slice(3)).otherwise(pl.col("raw")),
            byte_offset=pl.col("byte_offset") + pl.when(at_bom).then(3).otherwise(0),
            byte_length=pl.col("byte_length") - pl.when(at_bom).then(3).otherwise(0),
        )
    )
    try:
        frame = frame.with_columns(text=pl.col("raw").cast(pl.String), raw=pl.lit(None, pl.Binary), utf8_ok=pl.lit(True))
    except pl.exceptions.ComputeError:
        frame = _decode_lossy(frame)
    return Loaded(frame.select(list(LINE_SCHEMA)).cast(LINE_SCHEMA), digests, sizes, boms, errors)


def _sha256(data: memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _done(value: str) -> Future[str]:
    future: Future[str] = Future()
    future.set_result(value)
    return future


def _decode_lossy(frame: pl.DataFrame) -> pl.DataFrame:
    # Rare path: a file of the batch is not valid UTF-8. Each file is cast at once; only the lines
    # of a file that fails are decoded one by one (with replacement characters; raw bytes kept).
    parts = []
    for part in frame.partition_by("file_idx", maintain_order=True):
        try:
            parts.append(part.with_columns(text=pl.col("raw").cast(pl.String), raw=pl.lit(None, pl.Binary), utf8_ok=pl.lit(True)))
            continue
        except pl.exceptions.ComputeError:
            pass
        texts, raws, oks = [], [], []
        for b in part.get_column("raw").to_list():
            try:
                texts.append(b.decode("utf-8"))
                raws.append(None)
                oks.append(True)
            except UnicodeDecodeError:
                texts.append(b.decode("utf-8", errors="replace"))
                raws.append(b)
                oks.append(False)
        parts.append(part.with_columns(
            text=pl.Series(texts, dtype=pl.String), raw=pl.Series(raws, dtype=pl.Binary),
            utf8_ok=pl.Series(oks, dtype=pl.Boolean),
        ))
    return pl.concat(parts)
