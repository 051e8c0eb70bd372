"""The narrow table of the chunked-sessions plan, measured in the converter: bytes per observation.

    PYTHONPATH=. python bench/narrow.py --archive bench/archive/256

Converts the archive (one batch at a time, into a temporary folder unless --out is given) and, in
each batch, keeps the columns of the classified observations that the narrow pass would hold
(docs/decisions/005-chunked-sessions.md; NARROW below, with each line's byte offset and
length, and the observation's ord and json_hash) and observation_index's output. Prints the sum over
the batches of their Polars `estimated_size`, per observation: as the converter holds these columns
today (strings), and with the repetitive strings categorical and the stream as an Int32 id. The
line-local extras the record table reads (EXTRAS: agent_progress copy uuids, toolUseResult.agentId
and its result's call IDs, queue-operation contents and reasons) and the record table itself
(sql/batch/record_table.sql, one row per record) are counted apart; the block keys and the small-family
values the plan adds later are not computed by the converter yet and are not counted. `text_head` is
counted only where it starts with `<bash-` (shell calls), as the plan keeps it. Also prints the size
of the narrow frame the converter builds in pass 1 and reads in its narrow stage
(`narrow_observations`: claude_code.pass1.NARROW_COLUMNS and ord). The frames are taken by wrapping three
functions of the converter (batch.sql.register, batch.sql.view and batch.sql.materialize); the
conversion's own output is unchanged.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from pathlib import Path

import polars as pl

import batch
import batch.sql as batch_sql

# pass-1 columns of the plan that classified holds (besides the line's byte offset and length)
NARROW = (
    "ord", "file_idx", "line", "sub", "file_rank", "session_key", "native_type", "native_subtype", "kind",
    "uuid", "parent_uuid", "logical_parent_uuid", "message_id", "request_id", "prompt_id", "timestamp",
    "is_sidechain", "is_compact_summary", "is_synthetic", "native_agent_id", "progress_agent_id",
    "permission_mode", "tool_use_id", "parent_tool_use_id", "cwd", "version", "git_branch", "leaf_uuid",
    "custom_title", "ai_title", "summary", "entrypoint", "forked_from_session_id", "text_head", "json_hash",
)
# line-local values taken where each line is decoded (observations.sql) for the record table
EXTRAS = ("progress_copy_uuid", "result_agent_id", "result_call_ids", "queue_content", "queue_reason")
# strings with few distinct values: categorical in the second figure
REPETITIVE = ("native_type", "native_subtype", "kind", "permission_mode", "cwd", "version", "git_branch", "entrypoint")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", type=Path, required=True)
    parser.add_argument("--out", type=Path, help="output folder (default: a temporary one, removed)")
    args = parser.parse_args()

    lock = threading.Lock()
    lines: list[pl.DataFrame] = []  # each batch's non-blank lines
    narrow: list[pl.DataFrame] = []
    index: list[pl.DataFrame] = []
    stage: list[pl.DataFrame] = []  # the converter's narrow frame, as observation_index reads it
    extras: list[pl.DataFrame] = []
    records: list[pl.DataFrame] = []
    register, view, materialize = batch_sql.register, batch_sql.view, batch_sql.materialize

    def register_frames(con, name, frame, *a, **kw):
        with lock:
            if name == "batch_lines":
                lines.append(frame.select("file_idx", "line", "byte_offset", "byte_length"))
            elif name == "classified" and "content" in frame.columns:  # its first registration
                narrow.append(frame.select(
                    *NARROW[:-2], text_head=pl.when(pl.col("text_head").str.starts_with("<bash-")).then("text_head"),
                    json_hash="json_hash",
                ))
                extras.append(frame.select(EXTRAS))
            elif name == "narrow_observations" and "ord" in frame.columns:
                stage.append(frame)
        return register(con, name, frame, *a, **kw)

    def view_keys(con, name, *a, **kw):
        if name == "observation_keys":
            keys = con.table("observation_index").pl()
            with lock:
                index.append(keys)
        return view(con, name, *a, **kw)

    def materialize_records(con, name, *a, **kw):
        materialize(con, name, *a, **kw)
        if name == "record_table":
            table = con.table("record_table").pl()
            with lock:
                records.append(table)

    batch_sql.register, batch_sql.view, batch_sql.materialize = register_frames, view_keys, materialize_records
    with tempfile.TemporaryDirectory() as tmp:
        batch.convert([args.archive], args.out or Path(tmp) / "out", workers=1)

    # one batch at a time: the n-th batch_lines registered is the n-th batch's
    frame = pl.concat(
        [f.join(l, on=["file_idx", "line"], how="left", maintain_order="left") for f, l in zip(narrow, lines, strict=True)]
    )
    all_lines = pl.concat(lines)
    keys = pl.concat(index)
    n = frame.height
    streams = frame.get_column("session_key").unique().sort()
    compact = frame.with_columns(
        pl.col("session_key").replace_strict(streams, pl.int_range(streams.len(), eager=True, dtype=pl.Int32)),
        *(pl.col(c).cast(pl.Categorical) for c in REPETITIVE),
    )
    result = {
        "observations": n,
        "lines": all_lines.height,  # non-blank lines read
        "line_bytes": int(all_lines.get_column("byte_length").sum()),
        "batches": len(narrow),
        "narrow_columns": len(frame.columns),
        "narrow_bytes_per_observation": round(frame.estimated_size() / n, 1),
        "narrow_compact_bytes_per_observation": round(compact.estimated_size() / n, 1),
        "narrow_stage_columns": len(stage[0].columns),
        "narrow_stage_bytes_per_observation": round(sum(f.estimated_size() for f in stage) / n, 1),
        "narrow_stage_bytes_per_column": {
            c: round(sum(f.get_column(c).estimated_size() for f in stage) / n, 1) for c in stage[0].columns
        },
        "index_columns": len(keys.columns),
        "index_bytes_per_observation": round(keys.estimated_size() / n, 1),
        "session_key_bytes_per_observation": round(frame.get_column("session_key").estimated_size() / n, 1),
        "extra_columns": len(EXTRAS),
        "extra_bytes_per_observation": round(pl.concat(extras).estimated_size() / n, 1),
        "record_table_rows": sum(r.height for r in records),
        "record_table_columns": len(records[0].columns),
        "record_table_bytes_per_observation": round(pl.concat(records).estimated_size() / n, 1),
        "index_string_bytes_per_observation": {
            c: round(keys.get_column(c).estimated_size() / n, 1) for c in keys.columns if keys.schema[c] == pl.String
        },
    }
    result["total_bytes_per_observation"] = round(
        result["narrow_bytes_per_observation"] + result["index_bytes_per_observation"], 1
    )
    result["total_compact_bytes_per_observation"] = round(
        result["narrow_compact_bytes_per_observation"] + result["index_bytes_per_observation"], 1
    )
    result["total_share_of_line_bytes"] = round(result["total_bytes_per_observation"] * n / result["line_bytes"], 3)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
