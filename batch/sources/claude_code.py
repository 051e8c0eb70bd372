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


def batches(files: list[SourceFile], *, max_bytes: int) -> list[list[SourceFile]]:
    """Group files into batches of whole session groups (a main session with its subagents)."""
    groups: dict[str, list[SourceFile]] = {}
    for f in files:
        owner = f.parent_session_id if f.stream_kind == "subagent" and f.parent_session_id else f.session_key
        groups.setdefault(owner, []).append(f)
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


def read_lines(files: list[SourceFile]) -> tuple[pl.DataFrame, list[str]]:
    """Split each file into physical lines with file index, 1-based line number and byte offset.

    The split and the UTF-8 check run in Arrow per file, never per line; only the lines of a file
    that is not valid UTF-8 are decoded one by one (with replacement characters; their raw bytes
    are kept). Also return each file's sha256.
    """
    frames = []
    digests = []
    for idx, f in enumerate(files):
        try:
            data = f.path.read_bytes()
        except OSError as exc:
            raise SourceError(f"{f.name}: cannot be read ({exc.strerror}). Check its permissions.") from exc
        digests.append(hashlib.sha256(data).hexdigest())
        if not data:
            continue
        lines = pc.split_pattern(pa.array([data], pa.large_binary()), pattern=b"\n").flatten()
        has_newline = data.endswith(b"\n")
        if has_newline:
            lines = lines.slice(0, len(lines) - 1)
        lengths = pc.binary_length(lines)
        n = len(lines)
        ends = pc.cumulative_sum(pc.add(lengths, 1))
        offsets = pc.subtract(ends, pc.add(lengths, 1))
        try:
            text = lines.cast(pa.large_string())
            raw = pa.nulls(n, pa.large_binary())
            utf8_ok = pa.repeat(True, n)
        except pa.ArrowInvalid:
            text, raw, utf8_ok = _decode_lossy(lines)
        newline = pa.array([True] * (n - 1) + [has_newline], pa.bool_()) if n else pa.array([], pa.bool_())
        frames.append(
            pl.DataFrame(
                {
                    "file_idx": pl.Series([idx], dtype=pl.Int32).new_from_index(0, n),
                    "line": pl.int_range(1, n + 1, eager=True, dtype=pl.Int64),
                    "byte_offset": pl.from_arrow(offsets).cast(pl.Int64),
                    "byte_length": pl.from_arrow(lengths).cast(pl.Int64),
                    "text": pl.from_arrow(text),
                    "raw": pl.from_arrow(raw).cast(pl.Binary),
                    "utf8_ok": pl.from_arrow(utf8_ok),
                    "has_newline": pl.from_arrow(newline),
                }
            )
        )
    if not frames:
        return pl.DataFrame(schema=LINE_SCHEMA), digests
    return pl.concat(frames, how="vertical").with_columns(pl.col("text").cast(pl.String)), digests


def _decode_lossy(lines: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    # Rare path: only files that are not valid UTF-8 get here.
    texts, raws, oks = [], [], []
    for b in lines.to_pylist():
        try:
            texts.append(b.decode("utf-8"))
            raws.append(None)
            oks.append(True)
        except UnicodeDecodeError:
            texts.append(b.decode("utf-8", errors="replace"))
            raws.append(b)
            oks.append(False)
    return pa.array(texts, pa.large_string()), pa.array(raws, pa.large_binary()), pa.array(oks, pa.bool_())
