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
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from batch.errors import SourceError

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")
PEEK_LINES = 8
PEEK_BYTES = 1 << 16


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


def default_source() -> Path:
    """Return `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(base) / "projects" if base else Path.home() / ".claude" / "projects"


def discover(sources: list[Path]) -> Discovery:
    """Find transcript files under each source path (a folder or a file)."""
    found = Discovery()
    seen: set[Path] = set()
    for src in sources:
        if not src.exists():
            raise SourceError(f"{src}: no such file or folder. Pass a Claude Code projects folder or .jsonl files.")
        root = src.resolve()
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in paths:
            if path in seen:
                continue
            seen.add(path)
            # shown as <source folder name>/<path below it>, or the file name: the same on every machine
            name = path.relative_to(root.parent).as_posix()
            folders = path.relative_to(root).parts[:-1] if root.is_dir() else ()
            if "tool-results" in folders:
                found.tool_result_files.add(path.name)
                continue
            if path.suffix != ".jsonl":
                if not path.name.endswith(".meta.json"):
                    found.skipped.append((name, "not a .jsonl file"))
                continue
            if path.name == "journal.jsonl" and "workflows" in folders:
                found.skipped.append((name, "workflow run journal, not a transcript"))
                continue
            found.files.append(_classify(path, name))
    found.files.sort(key=lambda f: (f.session_key, f.name))
    return found


def _classify(path: Path, name: str) -> SourceFile:
    size = path.stat().st_size
    head = _peek(path) if size else []
    agent_match = AGENT_FILE_RE.match(path.name)
    agent_id = next((o["agentId"] for o in head if isinstance(o.get("agentId"), str)), None)
    session_ids = [o["sessionId"] for o in head if isinstance(o.get("sessionId"), str)]
    if agent_match or agent_id:
        agent_id = agent_id or agent_match.group(1)
        nested = path.parent.name == "subagents" or "subagents" in path.parts
        parent = _subagents_owner(path) if nested else None
        parent = parent or (session_ids[0] if session_ids else None)
        sidecar_path = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
        sidecar = _read_sidecar(sidecar_path)
        key = f"{parent}/{agent_id}" if parent else f"agent-{agent_id}"
        return SourceFile(path, name, size, "subagent", agent_id, key, parent, agent_id, sidecar)
    stem = path.name[: -len(".jsonl")]
    session_id = stem if UUID_RE.match(stem) else (session_ids[0] if session_ids else stem)
    return SourceFile(path, name, size, "main", session_id, session_id)


def _subagents_owner(path: Path) -> str | None:
    parts = path.parts
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "subagents":
            return parts[i - 1]
    return None


def _peek(path: Path) -> list[dict]:
    with path.open("rb") as fh:
        head = fh.read(PEEK_BYTES)
    out = []
    for raw in head.split(b"\n")[:PEEK_LINES]:
        try:
            obj = json.loads(raw)
        except ValueError:
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


def read_lines(files: list[SourceFile], hasher: Executor | None = None) -> tuple[pl.DataFrame, list[Future[str]]]:
    """Split the files of a batch into physical lines with file index, 1-based line number and byte offset.

    All files are read into one buffer and split once in Arrow, never per line; only the lines of a
    file that is not valid UTF-8 are decoded one by one (with replacement characters; their raw
    bytes are kept). Also return each file's sha256, computed on `hasher` when given, so hashing
    overlaps with the next steps (hashlib releases the GIL).
    """
    sizes = [f.size for f in files]
    buffer = bytearray(sum(sizes))
    view = memoryview(buffer)
    starts, digests, position = [0], [], 0
    for f, size in zip(files, sizes):
        try:
            with f.path.open("rb") as fh:
                got = fh.readinto(view[position : position + size])
        except OSError as exc:
            raise SourceError(f"{f.name}: cannot be read ({exc.strerror}). Check its permissions.") from exc
        if got != size:
            raise SourceError(f"{f.name}: changed size while being read. Convert it again once it is complete.")
        chunk = view[position : position + size]
        digests.append(hasher.submit(_sha256, chunk) if hasher else _done(_sha256(chunk)))
        position += size
        starts.append(position)
    if not buffer:
        return pl.DataFrame(schema=LINE_SCHEMA), digests
    # one Arrow value per file, over the same buffer; split once into lines
    per_file = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(files), [None, pa.array(starts, pa.int64()).buffers()[1], pa.py_buffer(buffer)]
    )
    pieces = pc.split_pattern(per_file, pattern=b"\n")
    # a file ending in a newline (and an empty file) splits into one empty piece after its last line
    ends_newline = [size == 0 or buffer[end - 1] == 10 for size, end in zip(sizes, starts[1:])]
    file_idx = pl.col("file_idx")
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
    )
    try:
        frame = frame.with_columns(text=pl.col("raw").cast(pl.String), raw=pl.lit(None, pl.Binary), utf8_ok=pl.lit(True))
    except pl.exceptions.ComputeError:
        frame = _decode_lossy(frame)
    return frame.select(list(LINE_SCHEMA)).cast(LINE_SCHEMA), digests


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
