"""What Python makes of a batch's streams beside the statements (formats/claude_code/converter.py):
the frame of the streams, the blank-line test, the rejects of lines too long to decode, the virtual
files of subagents rebuilt from agent_progress copies, the rejects table, and the manifest's entry of
each stream read."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from batch.formats.lines import LINE_TOO_LONG, LineChunks
from batch.sources.base import Stream
from batch.transforms.recover import OBJECT_SCHEMA, REJECT_SCHEMA, UNCOMMITTED

# A blank line: Unicode White_Space alone, as str.strip_chars tells it, without a stripped copy.
BLANK = pl.col("text").str.contains(r"^\s*$")


@dataclass
class Narrowed:
    """What the manifest's entries of the streams read take from the narrow steps: the foreign files,
    each file's versions in the order they first appear, and its blank lines."""

    foreign: pl.Series
    versions: dict[int, list[str]]
    blank_counts: dict[int, int]


def streams_frame(files: list[Stream]) -> pl.DataFrame:
    """One row per stream of the batch (`batch_files`): its index, names and kind, and its rank among
    the files that hold the same stream, whose positions a prefix tells apart."""
    # Several files can hold the same stream (copies of one session): the largest ranks first.
    ranked = sorted(range(len(files)), key=lambda i: (files[i].session_key, -files[i].size, files[i].name))
    rank: dict[int, int] = {}
    previous, r = None, 0
    for i in ranked:
        r = r + 1 if files[i].session_key == previous else 0
        previous = files[i].session_key
        rank[i] = r
    return pl.DataFrame(
        {
            "file_idx": list(range(len(files))),
            "source_file": [f.name for f in files],
            "session_key": [f.session_key for f in files],
            "session_id": [f.session_id for f in files],
            "stream_kind": [f.stream_kind for f in files],
            "parent_session_id": [f.parent_session_id for f in files],
            "agent_id": [f.agent_id for f in files],
            "sidecar": [f.sidecar for f in files],
            "content_level": [f.content_level for f in files],
            "producer_source": [f.producer_source for f in files],
            "file_rank": [rank[i] for i in range(len(files))],
            # positions in a second copy of a stream's file are told apart by a prefix
            "position_prefix": [f"copy{rank[i]}:" if rank[i] else "" for i in range(len(files))],
            "record_source": ["transcript"] * len(files),
            "meta": [f.meta for f in files],
        },
        schema={
            "file_idx": pl.Int32, "source_file": pl.String, "session_key": pl.String, "session_id": pl.String,
            "stream_kind": pl.String, "parent_session_id": pl.String, "agent_id": pl.String,
            "sidecar": pl.String, "content_level": pl.String, "producer_source": pl.String,
            "file_rank": pl.Int32, "position_prefix": pl.String, "record_source": pl.String,
            "meta": pl.String,
        },
    )


def too_long_rejects(lines: pl.DataFrame) -> pl.DataFrame:
    """The rejects (REJECT_SCHEMA) of `lines` (file_idx, line, byte_length) rejected undecoded: longer
    than a batch converted again after running out of memory may decode."""
    return lines.select(
        "file_idx", "line", reason=pl.lit(LINE_TOO_LONG),
        detail=pl.format("a line of {} bytes needs more memory than this run may use (--memory-mb)", pl.col("byte_length")),
    ).cast(REJECT_SCHEMA)


def virtual_files(copies: pl.DataFrame, files_frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The virtual file of each subagent stream rebuilt from agent_progress copies (sql/batch/decode/progress_copies.sql),
    added to `files_frame` after its files, and the copies as objects of those files (OBJECT_SCHEMA)."""
    parents = files_frame.select("file_idx", "content_level", "producer_source", "meta")
    virtual = (
        copies.unique("child_session_key", keep="first", maintain_order=True)
        .join(parents, on="file_idx", how="left")
        .with_row_index("i")
        .select(
            file_idx=(pl.col("i") + files_frame.height).cast(pl.Int32),
            source_file="source_file",
            session_key="child_session_key",
            session_id="agent_id",
            stream_kind=pl.lit("subagent"),
            parent_session_id="parent_session_id",
            agent_id="agent_id",
            sidecar=pl.lit(None, pl.String),
            content_level="content_level",
            producer_source="producer_source",
            file_rank=pl.lit(0, pl.Int32),
            position_prefix=pl.lit("agent_progress:"),
            record_source=pl.lit("agent_progress"),
            meta="meta",
            is_foreign=pl.lit(False),
        )
    )
    files_frame = pl.concat([files_frame, virtual])
    objects = copies.join(
        virtual.select("file_idx", child_session_key="session_key"), on="child_session_key", suffix="_virtual"
    ).select(
        file_idx="file_idx_virtual", line="line", sub="sub", json="json", reason=pl.lit(None, pl.String)
    ).cast(OBJECT_SCHEMA)
    return files_frame, objects


def rejects_out(
    lines: pl.DataFrame, rejects: pl.DataFrame, files_frame: pl.DataFrame, foreign: pl.Series, files: list[Stream]
) -> pl.DataFrame:
    """The rejects table: each line rejected (`rejects`, their text from `lines`) with its first and its
    raw bytes, and each foreign file once, with its first line's first bytes."""
    names = files_frame.select("file_idx", "source_file")
    bad = (
        rejects.filter(pl.col("reason") != UNCOMMITTED)  # kept in source_lines only: not a reject
        .join(lines, on=["file_idx", "line"], how="left")
        .join(names, on="file_idx", how="left")
        .select(
            "source_file", "line", "byte_offset", "byte_length", "reason", "detail",
            first_bytes=pl.col("text").str.slice(0, 120),
            raw=pl.coalesce(pl.col("raw"), pl.col("text").cast(pl.Binary)),
        )
    )
    whole = (
        names.filter(pl.col("file_idx").is_in(foreign.implode()))
        .join(lines.filter(pl.col("line") == 1).select("file_idx", first_bytes=pl.col("text").str.slice(0, 120)),
              on="file_idx", how="left")
        .select(
            "source_file",
            line=pl.lit(None, pl.Int64),
            byte_offset=pl.lit(0, pl.Int64),
            byte_length=pl.col("file_idx").replace_strict(
                {i: f.size for i, f in enumerate(files)}, default=None, return_dtype=pl.Int64
            ),
            reason=pl.lit("foreign_file"),
            detail=pl.lit("no line is a Claude Code JSON object (for example one pretty-printed JSON document)"),
            first_bytes="first_bytes",
            raw=pl.lit(None, pl.Binary),
        )
    )
    return pl.concat([bad, whole], how="vertical_relaxed").sort("source_file", "line", nulls_last=False)


def inputs(
    files: list[Stream], reader: LineChunks, narrowed: Narrowed, per_file: dict[str, int]
) -> tuple[list[dict], list[tuple[str, str]]]:
    """The manifest's entry of each stream read, and the streams that could not be read."""
    foreign = set(narrowed.foreign.to_list())
    inputs = [
        {
            "path": f.name,
            **({"provenance": list(f.provenance)} if f.provenance else {}),
            "size": reader.sizes[i],
            "sha256": reader.digests[i].result(),
            "session_key": f.session_key,
            "stream_kind": f.stream_kind,
            "lines": per_file.get(f.name, 0),
            "versions": narrowed.versions.get(i, []),
            "blank_lines": narrowed.blank_counts.get(i, 0),
            "status": "foreign" if i in foreign else ("empty" if reader.sizes[i] == 0 else "converted"),
            **({"byte_order_mark": True} if reader.boms[i] else {}),
        }
        for i, f in enumerate(files)
        if reader.errors[i] is None
    ]
    skipped = [(f.name, error) for f, error in zip(files, reader.errors) if error is not None]
    return inputs, skipped
