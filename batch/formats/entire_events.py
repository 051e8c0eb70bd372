"""Entire agent-protocol lifecycle events (hook data) as records of the session they name.

The companion's "Lifecycle events": one JSON event per line (reference §3, Event: `type` 1..7 =
SessionStart, TurnStart, TurnEnd, Compaction, SessionEnd, SubagentStart, SubagentEnd;
`session_id`, `previous_session_id`, `model`, `timestamp`, ...). Per event line one record of the
session `session_id` names (record_source entire_events, position `events:line:N` of its file):
- SessionStart sets `sessions.started_at`;
- TurnStart, TurnEnd and SessionEnd set the state running, idle and ended (`session_events`, field
  state, on change only);
- SubagentStart and SubagentEnd are records of kind subagent;
- Compaction alone is an audit-only record of kind `io.entire/compaction` (no `compactions` row: the
  compaction itself comes from the transcript);
- previous_session_id is lineage continues (reason other, evidence native_field);
- another integer type is kept as kind unknown.
The records of a session held also by a transcript join its stream: they have no position in that
transcript, so they come after its records (seq null here, numbered by transforms/tail.py).
"""

from __future__ import annotations

from concurrent.futures import Executor
from functools import partial
from pathlib import Path

import duckdb
import polars as pl

from batch import sql
from batch.formats.base import Converted
from batch.formats.lines import read_lines
from batch.schema.core import RECORDS, REJECTS, SESSION_EVENTS, SOURCE_LINES
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import Loaded, Stream, Unit
from batch.sources.claude_code import NO_TOOL_RESULTS, ToolResults
from batch.sources.events import EventFiles, find

FORMAT = "entire-agent-events"
RECORD_SOURCE = "entire_events"
POSITION_PREFIX = "events:"
STATES = {"TurnStart": "running", "TurnEnd": "idle", "SessionEnd": "ended"}
KINDS = {
    "SessionStart": "session_info", "TurnStart": "session_info", "TurnEnd": "session_info",
    "SessionEnd": "session_info", "SubagentStart": "subagent", "SubagentEnd": "subagent",
    "Compaction": "io.entire/compaction",
}
FOREIGN_DETAIL = (
    "no line is an Entire agent-protocol event (a JSON object with an integer type and a session_id); "
    "a Claude Code transcript is passed as a source, not with --entire-events"
)


def discover(paths: list[Path], known: dict | None = None) -> tuple[list[Unit], EventFiles]:
    """Units of the event files under `paths`: one per (file, session), owned by the session key.

    A unit's owner is the session it names, so its events share a batch with that session's
    transcript. Lines naming no session go with the file's first session (or, in a file naming
    none, with the file's only unit). `known` (a previous discovery's `EventFiles.heads`) gives the
    sessions of the files whose name, size and modification time are the same, which are not read
    again (as make and rsync compare files)."""
    found = find(paths)
    units = []
    for path, shown in found.files:
        st = path.stat()
        size = st.st_size
        # every unit of the file is converted again when the file changes (name, size, modification time)
        fingerprint = ((shown, size, st.st_mtime_ns, None),)
        seen = (known or {}).get(shown)
        if _head_unchanged(seen, size, st.st_mtime_ns):
            owners = [tuple(owned) for owned in seen[2]]
        else:
            probe = Stream(shown, size, "main", shown, shown, path=path, producer_source=FORMAT)
            lines = read_lines([probe]).lines
            sessions = (
                lines.select(session=pl.col("text").str.json_path_match("$.session_id"), size=pl.col("byte_length") + 1)
                .filter(pl.col("session").is_not_null() & (pl.col("session") != ""))
                .group_by("session", maintain_order=True).agg(pl.col("size").sum())
            )
            owners = list(sessions.iter_rows()) or [(shown, size)]
        found.heads[shown] = [size, st.st_mtime_ns, [list(owned) for owned in owners]]
        for key, owned in owners:
            stream = Stream(shown, size, "main", key, key, path=path, producer_source=FORMAT, mtime_ns=st.st_mtime_ns)
            units.append(Unit(key, owned, partial(Loaded, [stream]), label=f"{shown}: session {key}",
                              fingerprint=fingerprint, newest=st.st_mtime_ns))
    return units, found


def _head_unchanged(seen: object, size: int, mtime_ns: int) -> bool:
    """Whether `seen`, a file's entry of a previous discovery's heads, is of this size and
    modification time and lists its sessions as discovery does (session key, bytes it owns)."""
    return (
        isinstance(seen, list) and len(seen) == 3 and seen[:2] == [size, mtime_ns]
        and isinstance(seen[2], list) and len(seen[2]) > 0
        and all(
            isinstance(o, list) and len(o) == 2 and isinstance(o[0], str) and o[0] != ""
            and type(o[1]) is int and o[1] >= 0
            for o in seen[2]
        )
    )


def convert(
    con: duckdb.DuckDBPyConnection, streams: list[Stream], *, tool_results: ToolResults = NO_TOOL_RESULTS,
    hasher: Executor | None = None,
) -> Converted:
    """Map the event lines of each stream's session (one file may hold several sessions) into frames."""
    read = read_lines(streams, hasher)
    lines = read.lines.filter(~pl.col("text").str.contains(r"^\s*$"))
    sql.register(con, "event_lines", lines.select("file_idx", "line", "text"))
    checked = sql.frame(con, "entire_events")
    con.unregister("event_lines")
    files = pl.DataFrame(
        {"file_idx": range(len(streams)), "source_file": [s.name for s in streams],
         "stream_key": [s.session_key for s in streams]},
        schema={"file_idx": pl.Int32, "source_file": pl.String, "stream_key": pl.String},
    )
    whole = (
        lines.join(checked, on=["file_idx", "line"], how="left", maintain_order="left")
        .join(files, on="file_idx", how="left")
        .with_columns(
            first_session=pl.col("session_id").drop_nulls().first().over("file_idx"),
            is_event=pl.col("reason").is_null(),
        )
    )
    # a file holding several sessions is one manifest input: named by the stream of its first session
    first_session = dict(whole.group_by("file_idx").agg(pl.col("first_session").first()).iter_rows())
    every = (
        whole.with_columns(
            is_foreign=~pl.col("is_event").any().over("file_idx"),
            # session_id is null on rejected lines: they go with the file's first session's stream
            owner=pl.coalesce("session_id", pl.coalesce("first_session", "stream_key")),
        )
        .filter(pl.col("owner") == pl.col("stream_key"))
        .with_columns(
            session_key=pl.col("session_id"),
            position=pl.lit(POSITION_PREFIX + "line:") + pl.col("line").cast(pl.String),
        )
        .with_columns(
            record_id=pl.when(pl.col("is_event")).then(
                pl.col("session_key") + ":" + POSITION_PREFIX + pl.col("source_file") + ":line:"
                + pl.col("line").cast(pl.String)
            ),
        )
    )
    events = every.filter(pl.col("is_event"))
    records = _records(events)
    tables = {
        "records": records,
        "source_lines": _source_lines(every),
        "rejects": _rejects(every, streams),
        "session_events": _states(events),
        "lineage_evidence": _continues(events),
        "session_streams": _streams(events, every),
    }
    # an input entry counts the whole file, whichever streams of the batch own its lines
    counts = dict(lines.group_by("file_idx").len().iter_rows())
    physical = dict(read.lines.group_by("file_idx").len().iter_rows())
    foreign = set(every.filter(pl.col("is_foreign")).get_column("file_idx").unique().to_list())
    inputs = [
        {
            "path": s.name, "size": read.sizes[i], "sha256": read.digests[i].result(),
            "session_key": s.session_key if s.session_key != s.name else None, "stream_kind": "events",
            "lines": counts.get(i, 0), "versions": [], "format": FORMAT,
            "blank_lines": physical.get(i, 0) - counts.get(i, 0),
            "status": "empty" if read.sizes[i] == 0 else ("foreign" if i in foreign else "converted"),
        }
        for i, s in enumerate(streams)
        if read.errors[i] is None and first_session.get(i) in (None, s.session_key)
    ]
    skipped = [(s.name, error) for s, error in zip(streams, read.errors) if error is not None]
    return Converted(tables, inputs, skipped)


def _records(events: pl.DataFrame) -> pl.DataFrame:
    name = pl.col("event_name")
    frame = events.select(
        "record_id",
        "session_key",
        seq=pl.lit(None, pl.Int64),  # after the stream's transcript records: transforms/tail.py
        kind=name.replace_strict(KINDS, default="unknown", return_dtype=pl.String),
        position="position",
        source_file="source_file",
        source_line="line",
        timestamp=pl.col("timestamp").dt.convert_time_zone("UTC"),
        author=pl.lit("harness"),
        native_type=pl.coalesce(name, pl.col("event_type").cast(pl.String)),
        model="model",
        observation_count=pl.lit(1, pl.Int64),
        record_source=pl.lit(RECORD_SOURCE),
        native="text",
    )
    return _shaped(frame, RECORDS.schema)


def _source_lines(every: pl.DataFrame) -> pl.DataFrame:
    frame = every.select(
        "source_file", "line", "byte_offset", "byte_length",
        session_key="session_key",
        status=pl.when(pl.col("is_foreign")).then(pl.lit("foreign"))
        .when(pl.col("is_event")).then(pl.lit("mapped")).otherwise(pl.lit("rejected")),
        reason=pl.when(pl.col("is_foreign")).then(pl.lit("foreign_file")).otherwise("reason"),
        record_id="record_id",
        raw="raw",
    )
    return _shaped(frame, SOURCE_LINES.schema)


def _rejects(every: pl.DataFrame, streams: list[Stream]) -> pl.DataFrame:
    bad = every.filter(~pl.col("is_event") & ~pl.col("is_foreign")).select(
        "source_file", "line", "byte_offset", "byte_length", "reason", "detail",
        first_bytes=pl.col("text").str.slice(0, 120),
        raw=pl.coalesce(pl.col("raw"), pl.col("text").cast(pl.Binary)),
    )
    sizes = pl.DataFrame({"file_idx": range(len(streams)), "size": [s.size for s in streams]},
                         schema={"file_idx": pl.Int32, "size": pl.Int64})
    foreign = (
        every.filter(pl.col("is_foreign")).group_by("file_idx", "source_file").agg(
            first_bytes=pl.col("text").sort_by("line").first().str.slice(0, 120))
        .join(sizes, on="file_idx")
        .select(
            "source_file", line=pl.lit(None, pl.Int64), byte_offset=pl.lit(0, pl.Int64), byte_length="size",
            reason=pl.lit("foreign_file"), detail=pl.lit(FOREIGN_DETAIL), first_bytes="first_bytes",
            raw=pl.lit(None, pl.Binary),
        )
    )
    return _shaped(pl.concat([_shaped(bad, REJECTS.schema), _shaped(foreign, REJECTS.schema)]), REJECTS.schema)


def _states(events: pl.DataFrame) -> pl.DataFrame:
    """TurnStart, TurnEnd and SessionEnd as state changes, in file order; a repeated state is no change."""
    order = ["session_key", "source_file", "line"]
    frame = (
        events.filter(pl.col("event_name").is_in(list(STATES)))
        .sort(order)
        .with_columns(value=pl.col("event_name").replace_strict(STATES, return_dtype=pl.String))
        .with_columns(previous_value=pl.col("value").shift(1).over("session_key"))
        .filter(pl.col("previous_value").is_null() | (pl.col("value") != pl.col("previous_value")))
        .select(
            "record_id", "session_key", seq=pl.lit(None, pl.Int64), event_kind=pl.lit("session_info"),
            field=pl.lit("state"), value="value", previous_value="previous_value",
            native_type="event_name", native="text",
        )
    )
    return _shaped(frame, SESSION_EVENTS.schema)


def _continues(events: pl.DataFrame) -> pl.DataFrame:
    frame = (
        events.filter(pl.col("previous_session_id").is_not_null())
        .select(
            child_session_key="session_key", relation=pl.lit("continues"), parent_session_key="previous_session_id",
            source=pl.lit("entire.previous_session_id"),
        )
        .unique(maintain_order=True)
    )
    return _shaped(frame, WORK_SCHEMAS["lineage_evidence"])


def _streams(events: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame:
    """One row per session with events; sql/final/sessions.sql joins it to the session's transcript row, if any."""
    line_counts = every.filter(pl.col("session_key").is_not_null()).group_by("session_key").len("line_count")
    frame = (
        events.sort("session_key", "source_file", "line")
        .group_by("session_key", maintain_order=True)
        .agg(
            started_at=pl.col("timestamp").filter(pl.col("event_name") == "SessionStart").first(),
            ended_at=pl.col("timestamp").max(),
            record_count=pl.len().cast(pl.Int64),
            source_files=pl.col("source_file").unique(maintain_order=True),
        )
        .join(line_counts, on="session_key", how="left")
        .select(
            "session_key", session_id="session_key", stream_kind=pl.lit("main"),
            producer_method=pl.lit("import"), producer_source=pl.lit(FORMAT), content_level=pl.lit("full"),
            started_at=pl.col("started_at").dt.convert_time_zone("UTC"),
            ended_at=pl.col("ended_at").dt.convert_time_zone("UTC"),
            record_count="record_count", line_count=pl.col("line_count").cast(pl.Int64), source_files="source_files",
        )
    )
    return _shaped(frame, WORK_SCHEMAS["session_streams"])


def _shaped(frame: pl.DataFrame, schema) -> pl.DataFrame:
    """The frame with exactly the schema's columns and types (absent columns null)."""
    target = pl.from_arrow(schema.empty_table())
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in target.schema.items() if name not in frame.columns]
    return frame.with_columns(missing).select(target.columns).cast(target.schema)
