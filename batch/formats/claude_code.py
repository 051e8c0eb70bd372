"""Claude Code JSONL: the converter of the claude-code-jsonl format (registry entry), one batch at a time.

The streams of a batch (files, or Git blobs of Entire checkpoints) are read in chunks of whole
lines; pass 1 decodes each chunk alone (sql/batch/observations.sql), recovers its `}{` lines and
classifies its observations, keeping their wide frame and a narrow one (NARROW_COLUMNS). The narrow
stage then finds foreign files and versions, splits inline 1.0.x sidechains, numbers the
observations (ord) and indexes them (sql/batch/observation_index.sql) from the narrow frame; subagents
whose transcript is absent are rebuilt from agent_progress copies (wide). The record table
(sql/batch/record_table.sql) relates the records from the narrow frame too, and the observations are cut
into the chunks of pass 2 (chunk_ends), each of which folds its observations into records, parts and
source lines (_pass2). The other SQL files then run over the whole batch; the result is the batch's
frames of the core and fact tables and of the work tables the final stage reads.

A batch larger than STORE_BYTES keeps its wide rows in a store (formats/store.py) instead: pass 1
writes each chunk's classified observations there and keeps the narrow frame alone, pass 2 reads
each chunk's observations back and writes its records, parts and source lines there, the other
statements read them as views over the store's files, and the large output tables are handed over
a piece at a time.
"""

from __future__ import annotations

import io
from concurrent.futures import Executor

import duckdb
import polars as pl

from batch import slices, sql
from batch.formats.base import Converted
from batch.formats.lines import LineChunks, concat_lines
from batch.formats.store import Store
from batch.schema import TABLES, TABLES_BY_NAME
from batch.schema.work import WORK_SCHEMAS
from batch.sources.base import Stream
from batch.transforms.classify import classify
from batch.transforms.elide import Elided
from batch.transforms.recover import OBJECT_SCHEMA, REJECT_SCHEMA, UNCOMMITTED, recover

FORMAT = "claude-code-jsonl"
# The batch's output and work tables; those not built by the steps in `convert` are built by the
# sql/batch/<name>.sql files, in the order their `-- reads:` headers give (sql.order).
BATCH_OUTPUTS = (*(t.name for t in TABLES if t.stage == "batch"), *WORK_SCHEMAS)

# Slices of a batch's lines decoded at once (sql/batch/observations.sql), by the size of their text
# (docs/decisions/004-slices.md).
OBSERVE_SLICE_BYTES = 64 << 20
# Slices of a batch's records whose parts are converted at once (sql/batch/parts.sql), by the size of their
# JSON: the statement's working memory is the slice's (docs/decisions/004-slices.md).
PART_SLICE_BYTES = 64 << 20
# Chunks of a batch's observations converted at once by pass 2 of the core (records_full, parts,
# source_lines, number_faults, rejects: _pass2), by the size of their JSON text, cut where no record's
# live observations are on both sides (chunk_ends; docs/decisions/005-chunked-sessions.md).
# An ordinary batch is one chunk.
PASS2_CHUNK_BYTES = 64 << 20
# A batch whose streams hold more bytes than this, more than a chunk of pass 2, keeps its wide rows in
# a store (formats/store.py) instead of frames held to its end (docs/decisions/006-the-store.md).
STORE_BYTES = PASS2_CHUNK_BYTES
# The reason of a line rejected without being decoded: longer than a batch converted again after
# running out of memory may decode (pipeline, "A batch out of memory").
LINE_TOO_LONG = "line_too_long"

# records_full.sql's order by
RECORDS_ORDER = ("session_key", "seq")

# The columns of an observation that the narrow stage reads, and nothing wide (no JSON text, no
# content, no toolUseResult, no line text): foreign files (file_idx, native_type) and versions
# (version); the sidechain split (sql/batch/sidechain_roots.sql: uuid, parent_uuid, is_sidechain,
# stream_kind, native_agent_id; it changes session_key and stream_kind); ord (file_rank, file_idx,
# line, sub); and sql/batch/observation_index.sql (session_key, position, native_type, native_subtype,
# uuid, parent_uuid, message_id, permission_mode, json_hash, and is_compact_summary as classify
# derives it). The converter keeps these columns of each chunk of lines (_pass1) in the frame
# registered as `narrow_observations`, with `ord` added by the narrow stage.
# sql/batch/record_table.sql (docs/architecture.md, "The path of one session, from bytes to tables") reads
# it too: kind, logical_parent_uuid, prompt_id, progress_agent_id, progress_copy_uuid,
# result_agent_id, result_call_ids, queue_content, queue_reason, attribution_mcp_server and
# attribution_mcp_tool (besides keys named above). The chunk boundaries of pass 2 (chunk_ends)
# read json_bytes, the size of the observation's JSON text.
NARROW_COLUMNS = (
    "file_idx", "line", "sub", "file_rank", "session_key", "stream_kind", "position", "native_type",
    "native_subtype", "version", "uuid", "parent_uuid", "is_sidechain", "native_agent_id", "message_id",
    "permission_mode", "json_hash", "is_compact_summary",
    "kind", "logical_parent_uuid", "prompt_id", "progress_agent_id", "progress_copy_uuid", "result_agent_id",
    "result_call_ids", "queue_content", "queue_reason", "attribution_mcp_server", "attribution_mcp_tool",
    "json_bytes",
)

USAGE_SELECTION = (
    "One usage report per inference (assistant message.id) in the whole output. Within a stream, "
    "usage and stop reason come from the latest native observation of the response. Across streams "
    "(resume and fork copies), the observation with a stop reason is selected first, then the largest "
    "output count, then the smallest session_key and position. Every observation is kept in "
    "inference_observations. Synthetic API-error lines are not inferences. Usage is never read from "
    "toolUseResult.usage, nor from agent_progress copies of a subagent whose transcript is present; a "
    "subagent rebuilt from those copies (its transcript absent) says so in usage_source. Missing fields "
    "are null, never 0."
)
# Versions of the real transcripts the test suite converts (tests/fixtures/corpus).
REAL_EVIDENCE_VERSIONS = (
    "1.0.17", "1.0.24", "1.0.29", "1.0.51", "1.0.55", "1.0.56", "1.0.98", "1.0.108", "1.0.128",
    "2.0.0", "2.0.28", "2.0.31", "2.0.37", "2.0.42", "2.0.44", "2.0.55", "2.0.58", "2.0.76",
    "2.1.3", "2.1.6", "2.1.9", "2.1.17", "2.1.20", "2.1.38", "2.1.39", "2.1.42", "2.1.114",
    "2.1.158", "2.1.179", "2.1.181", "2.1.183", "2.1.185", "2.1.199",
)
# Registry items and the real versions whose transcripts back them with value-asserting tests
# (docs/coverage.md names each test). The entry states its contracts for 2.1.219-2.1.305: no real
# transcript of those versions is in the corpus, so every item is qualified only for the versions named.
REAL_EVIDENCE_BY_ITEM = {
    "main and subagent streams, session IDs": "1.0.17-2.1.199",
    "inline 1.0.x sidechains (lineage content_match)": "1.0.108",
    "entity keys; turnId = promptId": "1.0.17-2.1.199 (turnId 2.1.158-2.1.199)",
    "fold by message.id; usage and stop reason from the latest observation": "1.0.17-2.1.199",
    "origin.kind human, promptSource": "2.1.179-2.1.185",
    "queued_command of a person (steer); isMeta and attachments injected": "2.1.114-2.1.199",
    "task-notification (trigger task_completion)": "2.1.183",
    "command markers, local-command output": "2.0.0",
    "repeated metadata on change only; permission-mode with prompts' permissionMode": "2.1.114-2.1.199",
    "ai-title (titleSource model)": "2.1.158-2.1.185",
    "mode entry": "2.1.158-2.1.199",
    "last-prompt and the active leaf": "2.1.158-2.1.199",
    "pr-link": "2.1.183",
    "gitOperation (commit, push, pr created)": "2.1.181-2.1.199",
    "structured attachments as data parts": "2.1.114-2.1.199",
    "spawnedBy from the parent result agentId alone (native_field_partial)": "2.1.114",
    "background Bash terminals; exit code from an output read": "2.0.42-2.1.158",
    "TaskStop stops a background task": "2.1.158",
    "MCP tool names (provider mcp, server); attributionMcpServer/Tool on the inference": "2.1.158-2.1.181",
    "hooks (hook_success, stop_hook_summary, hook_additional_context)": "2.0.58-2.1.114",
    "compaction with its summary; logicalParentUuid": "2.0.76-2.1.185",
    "file-history-snapshot checkpoints": "2.0.58-2.1.199",
    "AskUserQuestion answers as selected labels": "2.1.38",
    "TodoWrite, Task tools, ExitPlanMode plans": "1.0.17-2.1.114",
    "deferred_tools_delta tool definitions": "2.1.114",
    "queue-operation remove withdraws": "2.0.42-2.1.39",
    "synthetic API errors are failed attempts": "2.1.6-2.1.9",
}
# Items of the entry that no real transcript in the corpus shows: covered by authored fixtures only.
UNQUALIFIED_ITEMS = (
    "turnOrigin", "scheduledTaskId, scheduledFireId, fireReason", "permissionDecision", "toolDenialKind",
    "api-request and requestDigest", "cost-state", "environment attachment", "memory_saved and memdirStamped",
    "custom-title", "forkedFrom, fork-context-ref, continued-in", "origin.kind peer, coordinator, observer, channel",
    "file-history-delta", "bridge-session", "sidecar toolUseId (spawnedBy native_field, launch prompt author agent)",
    "Monitor, background Agent",
)
COVERAGE = {
    "format": "claude-code-jsonl",
    "policy": (
        "Fields decoded into columns are listed per registry item in docs/coverage.md with the test that "
        "shows each. Every other field is kept verbatim, once (records.native, source_lines.native; parts name their block by native_path). "
        "An item is qualified for a version only by a real transcript of that version; items shown only by "
        "authored fixtures are covered but unqualified. Covering an event is not covering every field of its payload. "
        "The registry entry states its contracts for 2.1.219-2.1.305; the real transcripts converted by the tests "
        "are 1.0.17-2.1.199, so no item is qualified for the entry's versions."
    ),
    "real_evidence_versions": list(REAL_EVIDENCE_VERSIONS),
    "real_evidence_by_item": REAL_EVIDENCE_BY_ITEM,
    "unqualified_items": list(UNQUALIFIED_ITEMS),
}
RETENTION = (
    "Claude Code deletes transcripts after 30 days by default and may delete tool-results/ files under its "
    "retention policy; a bundle manifest that knows of a deletion records it as deleted_by_retention. A transcript "
    "archive holds no record of a deletion: a referenced file that is absent may have been deleted by retention, "
    "removed by hand or never copied. So deleted_by_retention is never claimed: each referenced file the archive "
    "lacks (a tool-results/ file a persisted output points to, a subagent transcript a parent's result or progress "
    "line names) is listed under absent_files with status absent and its possible causes, and its loss is declared "
    "(tool_output_truncated, subagent_transcript_absent, lineage). Sessions whose transcripts are gone leave no trace "
    "in an archive and cannot be listed."
)
UNASSIGNED = (
    "Facts without established session ownership are listed in _meta['com.anthropic.claude-code/unassigned'] "
    "and nowhere else: summary lines whose leafUuid is not a record of the stream holding them (a summary can "
    "describe another session's leaf). All such facts of the converted inputs are kept, whichever sessions "
    "were selected; their position in the file is evidence of where they were written, not of ownership."
)


def convert(
    con: duckdb.DuckDBPyConnection, files: list[Stream], *, tool_result_files: set[str], hasher: Executor | None = None
) -> Converted:
    """Convert the Claude Code streams of one batch into frames of the output and work tables."""
    reader = LineChunks(files, hasher)
    sql.register(con, "batch_tool_result_files", pl.DataFrame({"name": sorted(tool_result_files)}, schema={"name": pl.String}))
    files_frame = streams_frame(files)
    sql.register(con, "batch_files", files_frame.with_columns(is_foreign=pl.lit(False)))
    # a batch larger than a chunk of pass 2 keeps its wide rows in a store (formats/store.py)
    store = Store(con) if sum(f.size for f in files) > STORE_BYTES else None
    # long strings are elided before the decode and restored in the tables (transforms/elide.py);
    # a batch converted again with its long lines rejected (sql.max_line) decodes its lines whole
    elided = Elided() if sql.max_line(con) is None else None
    lines, observations, narrow, rejects, line_counts = _pass1(con, reader, store, elided)

    # The narrow stage: foreign files, versions, the sidechain split, ord and observation_index read
    # the narrow frame; only the agent_progress rebuild reads the wide one (the copies' JSON).
    versions = dict(
        narrow.group_by("file_idx").agg(pl.col("version").drop_nulls().unique(maintain_order=True)).iter_rows()
    )
    blank_counts = dict(line_counts.select("file_idx", "blank_lines").iter_rows())
    # A file in which no line is a typed JSON object is foreign input: reported once, not per line.
    typed = narrow.filter(pl.col("native_type").is_not_null()).get_column("file_idx").unique()
    foreign = line_counts.filter((pl.col("lines") > 1) & ~pl.col("file_idx").is_in(typed.implode())).get_column("file_idx")
    files_frame = files_frame.with_columns(is_foreign=pl.col("file_idx").is_in(foreign.implode()))
    not_foreign = ~pl.col("file_idx").is_in(foreign.implode())
    narrow, rejects = narrow.filter(not_foreign), rejects.filter(not_foreign)
    sql.register(con, "batch_files", files_frame)
    sql.register(con, "batch_rejects", rejects)
    if store is None:
        observations = observations.filter(not_foreign)
        sql.register(con, "observations", observations)
    else:  # the stored rows of the files kept
        sql.register(con, "store_keys", narrow.select("wide_row"))
        con.execute("create or replace temp view observations as select * exclude (wide_row) from wide "
                    "where wide_row in (select wide_row from store_keys)")
    observations, narrow, files_frame = _rebuild_from_progress(con, observations, narrow, files_frame, store)
    if store is None:
        con.unregister("observations")  # read by progress_copies alone
    else:
        con.execute("drop view observations")
    observations, narrow = _split_sidechains(con, observations, narrow)
    narrow, rows_by_ord = _ordered(narrow)
    # the narrow frame's rows are the wide frame's, in the same order: its ord is theirs
    if store is None:
        classified = observations.with_columns(narrow.get_column("ord"))
        sql.register(con, "classified", classified)
    else:
        classified = None
        _store_classified(con, narrow)
    del observations
    sql.register(con, "narrow_observations", narrow)
    sql.materialize(con, "observation_index")
    sql.view(con, "observation_keys")
    # what relates the records of a session, from narrow columns alone; records_full joins it
    sql.materialize(con, "record_table")
    # which records hold each tool call and its result, from narrow columns alone; tool_calls reads it
    sql.materialize(con, "call_pairs")
    con.unregister("narrow_observations")  # read by observation_index and record_table alone
    spans = con.sql(
        "select min(ord) as first, max(ord) as last from observation_index where is_live group by record_id"
    ).pl()
    ends = chunk_ends(narrow.select("ord", "file_idx", "line", "json_bytes"), spans, PASS2_CHUNK_BYTES)
    line_chunks = narrow.select(
        "file_idx", "line", chunk=ends.search_sorted(narrow.get_column("ord"), side="left")
    ).unique(["file_idx", "line"])
    keys = None if store is None else narrow.select("wide_row", "session_key", "stream_kind", "sidechain_root", "ord")
    del narrow, spans
    number_faults, records, parts, source_lines, rejects_out = _pass2(
        con, classified, rows_by_ord, ends, lines, rejects, line_chunks, files_frame, foreign, files, store, keys
    )
    sql.register(con, "batch_lines", lines)
    sql.register(con, "batch_rejects", rejects)
    # message.content (decoded, about a fifth of the batch's text) was read by records_full and parts;
    # the later statements read it on compact summaries alone (compactions.sql), as summary_content:
    # a later statement reading classified.content fails by name instead of reading nulls
    if store is None:
        sql.register(con, "records_full", records)
        sql.register(con, "batch_parts", parts)
        classified = classified.with_columns(
            summary_content=pl.when(pl.col("is_compact_summary")).then("content")
        ).drop("content")
        sql.register(con, "classified", classified)
        tables = {
            "number_faults": number_faults,
            "records": records.select(TABLES_BY_NAME["records"].names),  # records_full is wider: fact tables read the rest
            # the block's JSON stays in its line (native_path), and source_ord names that line in the batch
            "parts": parts.select(TABLES_BY_NAME["parts"].names),
            "tool_calls": _tool_calls(con, records, parts),
            "source_lines": source_lines,
            "rejects": rejects_out,
        }
        sql.register(con, "batch_source_lines", tables["source_lines"])
        sql.register(con, "batch_tool_calls", tables["tool_calls"])
        per_file = dict(tables["source_lines"].group_by("source_file").len().iter_rows())
    else:  # the same relations over the store; its large tables are read back a piece at a time, sorted
        _stored_classified(con, summary_content=True)
        _store_tool_calls(con, store)
        tables = {
            "number_faults": number_faults,
            "records": store.merged("records_pieces", RECORDS_ORDER, TABLES_BY_NAME["records"].names),
            "parts": store.merged("parts_pieces", sql.sorted_by("parts"), TABLES_BY_NAME["parts"].names),
            "tool_calls": store.read("batch_tool_calls"),
            "source_lines": store.merged("source_lines_pieces", sql.sorted_by("source_lines_out")),
            "rejects": rejects_out,
        }
        per_file = dict(con.sql("select source_file, count(*) from batch_source_lines group by source_file").fetchall())
    sql_files = set(sql.names())
    targets = [name for name in BATCH_OUTPUTS if name not in tables and name in sql_files]
    steps = sql.order(targets, given=sql.defined(con))
    read = {dep for name in steps for dep in sql.reads(name)}
    del parts
    for name in steps:
        if name in read:
            # read by later steps: computed once per batch into a temporary table (as a view,
            # every reader planned and ran it again)
            sql.materialize(con, name)
            if name in targets:
                tables[name] = con.table(name).pl()
        else:
            tables[name] = sql.frame(con, name)

    foreign_set = set(foreign.to_list())
    inputs = [
        {
            "path": f.name,
            **({"provenance": list(f.provenance)} if f.provenance else {}),
            "size": reader.sizes[i],
            "sha256": reader.digests[i].result(),
            "session_key": f.session_key,
            "stream_kind": f.stream_kind,
            "lines": per_file.get(f.name, 0),
            "versions": versions.get(i, []),
            "blank_lines": blank_counts.get(i, 0),
            "status": "foreign" if i in foreign_set else ("empty" if reader.sizes[i] == 0 else "converted"),
            **({"byte_order_mark": True} if reader.boms[i] else {}),
        }
        for i, f in enumerate(files)
        if reader.errors[i] is None
    ]
    skipped = [(f.name, error) for f, error in zip(files, reader.errors) if error is not None]
    if elided is not None:
        tables = {name: elided.restore(value) for name, value in tables.items()}
    return Converted(tables, inputs, skipped)


def _pass1(
    con: duckdb.DuckDBPyConnection, reader: LineChunks, store: Store | None = None, elided: Elided | None = None
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Pass 1: each chunk of lines (the read slices the reader yields, gathered up to
    OBSERVE_SLICE_BYTES of text) is decoded alone: its blank lines dropped (counted), its envelopes
    decoded (one parse per line: the decode also tells the lines that are one JSON object from the
    others, which go to recovery; the objects recovered are decoded after them), its `}{` lines
    recovered, its observations classified.

    Returns the batch's non-blank lines, its classified observations (the wide frame: every chunk's
    lines' objects, then every chunk's recovered objects, the order of one decode of the whole
    batch), the NARROW_COLUMNS of the same rows in the same order (the narrow frame), the rejects,
    and per file its count of non-blank and of blank lines. The lines of a stream that failed to be
    read to its end are dropped, as if it could not be read at all.

    With a `store`, each chunk's classified observations go to its table `wide` as they are made
    (_store_wide) and no wide frame is returned (None); the narrow frame then also holds each row's
    `wide_row` there. The lines keep their text only where a later step reads it: the rejected
    lines, and the first line of each file (a foreign file's first bytes)."""
    blank = pl.col("text").str.contains(r"^\s*$")  # Unicode White_Space, as str.strip_chars, without a stripped copy
    lines, counts, rejects, observed, recovered = [], [], [], [], []

    max_line = sql.max_line(con)  # a batch converted again after running out of memory

    def chunk_pass(chunk: pl.DataFrame) -> None:
        counts.append(chunk.group_by("file_idx").agg(lines=(~blank).sum(), blank_lines=blank.sum()))
        chunk = chunk.filter(~blank)
        # a line longer than `max_line` is rejected before its JSON is decoded (its bytes kept)
        too_long = pl.lit(False) if max_line is None else pl.col("byte_length") > max_line
        read = chunk.filter(~too_long)
        decoded = _observe(
            con,
            read.select(
                "file_idx", "line", sub=pl.lit(None, pl.Int64), json=pl.col("text"), reason=pl.lit(None, pl.String)
            ).cast(OBJECT_SCHEMA),
            keep_index=True,
            elided=elided,
        )
        not_objects = read.filter(~pl.int_range(pl.len(), dtype=pl.UInt32).is_in(decoded.get_column("obj_idx").implode()))
        objects, chunk_rejects = recover(not_objects.select("file_idx", "line", "text", "has_newline"))
        if max_line is not None:
            chunk_rejects = pl.concat([chunk_rejects, chunk.filter(too_long).select(
                "file_idx", "line", reason=pl.lit(LINE_TOO_LONG),
                detail=pl.format("a line of {} bytes needs more memory than this run may use (--memory-mb)",
                                 pl.col("byte_length")),
            ).cast(REJECT_SCHEMA)]).sort("file_idx", "line")
        classified = _classified(decoded.drop("obj_idx"))
        observed.append(classified if store is None else _store_wide(store, classified))
        if not objects.is_empty():
            recovered.append(_classified(_observe(con, objects.cast(OBJECT_SCHEMA), elided=elided)))
        lines.append(chunk if store is None else _read_text(chunk, chunk_rejects))
        rejects.append(chunk_rejects)

    # consecutive read slices are gathered into a chunk of at most OBSERVE_SLICE_BYTES of text (a
    # slice larger than that alone): a chunk's statements have a fixed cost, which many small read
    # slices would pay each
    pending, size = [], 0
    for piece in reader:
        piece_size = piece.get_column("text").str.len_bytes().sum()
        if pending and size + piece_size > OBSERVE_SLICE_BYTES:
            chunk_pass(concat_lines(pending))
            pending, size = [], 0
        pending.append(piece)
        size += piece_size
    if pending or not lines:  # a batch without lines: its frames have their schemas
        chunk_pass(concat_lines(pending))
    if store is None:
        wide = pl.concat(observed, rechunk=True) if len(observed) > 1 else observed[0]
        if recovered:
            wide = pl.concat([wide, *recovered])
        narrow = pl.concat([_narrow(frame) for frame in (*observed, *recovered)], rechunk=True)
    else:
        wide = None
        narrow = pl.concat([*observed, *(_store_wide(store, frame) for frame in recovered)], rechunk=True)
    del observed, recovered
    line_counts = pl.concat(counts).group_by("file_idx").agg(pl.col("lines", "blank_lines").sum())
    lines, rejects = concat_lines(lines), pl.concat(rejects)
    if failed := reader.failed:
        kept = ~pl.col("file_idx").is_in(failed)
        lines, narrow = lines.filter(kept), narrow.filter(kept)
        wide = None if wide is None else wide.filter(kept)
        rejects, line_counts = rejects.filter(kept), line_counts.filter(kept)
    return lines, wide, narrow, rejects, line_counts


def _narrow(classified: pl.DataFrame) -> pl.DataFrame:
    """The NARROW_COLUMNS of classified observations (json_bytes: the size of their JSON text)."""
    return classified.select(*NARROW_COLUMNS[:-1], json_bytes=pl.col("json").str.len_bytes())


def _store_wide(store: Store, classified: pl.DataFrame) -> pl.DataFrame:
    """Append classified observations to the store's table `wide`, numbered `wide_row` after the rows
    already there, and return their narrow frame with that number (the wide frame's row order) and
    their sidechain root (null: the sidechain split sets it in the narrow frame)."""
    classified = classified.with_columns(wide_row=pl.int_range(pl.len(), dtype=pl.Int64) + store.rows.get("wide", 0))
    store.append("wide", classified)
    return _owned(_narrow(classified).with_columns(classified.select("sidechain_root", "wide_row")))


def _owned(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of `frame` in memory of its own. A column of a statement's result shares the memory of
    the whole result (DuckDB hands it over to Arrow as one block per batch of rows, released when no
    column of it is left): a narrow frame kept from a wide result would keep all of it."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="uncompressed")
    buffer.seek(0)
    return pl.read_ipc(buffer)


def _store_classified(con: duckdb.DuckDBPyConnection, narrow: pl.DataFrame) -> None:
    """Register the keys of a store's observations (`store_keys`: their wide_row, the session_key,
    stream_kind and sidechain root of the sidechain split, and ord) and define `classified` over the
    store's `wide` rows with them, as the wide frame would be."""
    sql.register(con, "store_keys", narrow.select("wide_row", "session_key", "stream_kind", "sidechain_root", "ord"))
    _stored_classified(con, summary_content=False)


def _stored_classified(con: duckdb.DuckDBPyConnection, *, summary_content: bool) -> None:
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


def _stored_chunk(store: Store, keys: pl.DataFrame) -> pl.DataFrame:
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


def _store_tool_calls(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """_tool_calls over the store's records_full and batch_parts, as its table `batch_tool_calls`."""
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


def _read_text(lines: pl.DataFrame, rejects: pl.DataFrame) -> pl.DataFrame:
    """`lines` with the text of the rejected lines and of each file's first line only (copied, so
    that the slice's text buffer is not kept alive by them); null elsewhere."""
    rejected = pl.struct("file_idx", "line").is_in(rejects.select(pl.struct("file_idx", "line")).to_series().implode())
    kept = lines.filter(rejected | (pl.col("line") == 1)).select("file_idx", "line", text=pl.concat_str("text", pl.lit("")))
    return lines.drop("text").join(kept, on=["file_idx", "line"], how="left", maintain_order="left").select(lines.columns)


def chunk_ends(observations: pl.DataFrame, spans: pl.DataFrame, target: int) -> pl.Series:
    """The chunks of pass 2: contiguous ranges of ord of about `target` bytes of JSON text each.

    `observations` holds ord (1 to n), file_idx, line and json_bytes of every observation of the
    batch; `spans` the first and last ord of each record's live observations. A cut between ord k and
    k + 1 is allowed where they are on different lines (the objects recovered from one line stay
    together) and no record has live observations on both sides (a record's first-seen and latest
    observation, all its blocks, a boundary and its summary are in one chunk). Each chunk ends at the
    last allowed cut within `target` bytes of its start; where there is none (a record's live span
    longer than that), at the first allowed cut after it. Returns the last ord of each chunk
    (ascending, the last one n; [0] for a batch without observations): ord o is in chunk
    `ends.search_sorted(o, side="left")`. The loop runs once per chunk, not per line."""
    n = observations.height
    if n == 0:
        return pl.Series("ord", [0], pl.Int64)
    frame = observations.sort("ord")
    # records open after each ord: their live span starts at it or before and ends after it
    starts = spans.group_by(ord="first").len("starts")
    stops = spans.group_by(ord="last").len("stops")
    cuts = (
        frame.select(
            pl.col("ord").cast(pl.Int64),
            size=pl.col("json_bytes").cast(pl.Int64).clip(lower_bound=1).cum_sum(),
            new_line=(pl.col("file_idx") != pl.col("file_idx").shift(-1)) | (pl.col("line") != pl.col("line").shift(-1)),
        )
        .join(starts.cast({"ord": pl.Int64}), on="ord", how="left", maintain_order="left")
        .join(stops.cast({"ord": pl.Int64}), on="ord", how="left", maintain_order="left")
        .with_columns(open=(pl.col("starts").fill_null(0).cast(pl.Int64) - pl.col("stops").fill_null(0).cast(pl.Int64)).cum_sum())
        .filter(((pl.col("open") == 0) & pl.col("new_line").fill_null(True)) | (pl.col("ord") == n))
    )
    cut_sizes, cut_ords = cuts.get_column("size"), cuts.get_column("ord")
    ends, start = [], 0
    while not ends or ends[-1] != n:
        i = cut_sizes.search_sorted(start + target, side="right") - 1
        if i < 0 or cut_sizes[i] <= start:  # no allowed cut within the target: the next one
            i = cut_sizes.search_sorted(start, side="right")
        ends.append(cut_ords[i])
        start = cut_sizes[i]
    return pl.Series("ord", ends, pl.Int64)


def _pass2(
    con: duckdb.DuckDBPyConnection,
    classified: pl.DataFrame,
    rows_by_ord: pl.Series,
    ends: pl.Series,
    lines: pl.DataFrame,
    rejects: pl.DataFrame,
    line_chunks: pl.DataFrame,
    files_frame: pl.DataFrame,
    foreign: pl.Series,
    files: list[Stream],
    store: Store | None = None,
    keys: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame]:
    """Pass 2 of the core: number_faults, records_full (with its texts), parts, source_lines and the
    rejects, run once per chunk (chunk_ends) over the chunk's observations, lines and rejects, and
    concatenated into the frames one run over the whole batch gives (sorted by each one's order).

    A chunk's observations are `classified`'s rows of its ords, in the frame's order; each record is
    in the chunk of its live observations (record_table, materialized before, relates the records
    across chunks). A line belongs to the chunk of its observations (line_chunks); a line without any
    (rejected, or of a foreign file) to the last chunk.

    With a `store`, a chunk's observations are read from it (`keys`: the narrow frame's keys of
    them, _stored_chunk), and its records, parts and source lines go to it, as the tables
    `records_pieces`, `parts_pieces` and `source_lines_pieces`, a run each chunk (sorted as the frame's
    rows), read as `records_full`, `batch_parts` and `batch_source_lines` (in another order than the
    frames'; Store.merged gives theirs); None is returned for those frames."""
    last = ends.len() - 1
    pieces: list[list[pl.DataFrame]] = [[], [], [], [], []]
    if last > 0:
        lines_of, rejects_of = _chunk_of_lines(lines, line_chunks, last), _chunk_of_lines(rejects, line_chunks, last)
        # each chunk reads the rows of the index and of the record table of its own observations
        # and records (the statements join them by ord): the whole tables are set aside, and
        # restored, unchanged, for the steps after pass 2
        for name in ("observation_index", "record_table"):
            con.execute(f'alter table "{name}" rename to "{name}_whole"')
    if store is not None:
        con.execute("drop view classified")  # over the store; each chunk's rows are registered instead
    first = 1
    for chunk, end in enumerate(ends):
        if last == 0 and store is None:  # one chunk: the batch's frames as they are
            part, part_rows, part_lines, part_rejects = classified, rows_by_ord, lines, rejects
        else:
            # the chunk's rows of classified in the frame's order, and the row of each of its ords
            if store is None:
                part = classified.gather(rows_by_ord.slice(first - 1, end - first + 1).sort())
            else:
                part = _stored_chunk(store, keys.gather(rows_by_ord.slice(first - 1, end - first + 1).sort()))
            part_rows = part.get_column("ord").arg_sort()
            if last == 0:  # a store's one chunk
                part_lines, part_rejects = lines, rejects
            else:
                part_lines, part_rejects = lines.filter(lines_of == chunk), rejects.filter(rejects_of == chunk)
                for name, key in (("observation_index", "ord"), ("record_table", "first_ord")):
                    con.execute(
                        f'create or replace temp table "{name}" as select * from "{name}_whole" where {key} between ? and ?',
                        [first, end],
                    )
        sql.register(con, "classified", part)
        sql.register(con, "batch_lines", part_lines)
        sql.register(con, "batch_rejects", part_rejects)
        # This statement, records_full and parts need the most working memory of the chunk; DuckDB
        # keeps it for reuse, so it is returned after each (the later statements then start lower).
        # `parts` runs a slice of the records at a time (_parts): each slice needs less than what
        # `records_full` leaves.
        pieces[0].append(sql.frame(con, "number_faults"))
        sql.flush(con)
        records = _with_texts(sql.frame(con, "records_full"), part, part_rows, first)
        sql.flush(con)
        parts = _parts(con, records)
        sql.flush(con)
        source_lines = _source_lines(con, part, part_rows, first)
        if store is None:
            pieces[1].append(records)
            pieces[2].append(parts)
            pieces[3].append(source_lines)
        else:
            for table, frame in (("records_pieces", records), ("parts_pieces", parts), ("source_lines_pieces", source_lines)):
                store.append(table, frame)
        del records, parts, source_lines
        pieces[4].append(_rejects_out(part_lines, part_rejects, files_frame, foreign if chunk == last else foreign.clear(), files))
        first = end + 1
    del part, part_rows, part_lines, part_rejects
    if last > 0:
        for name in ("observation_index", "record_table"):
            con.execute(f'drop table "{name}"')
            con.execute(f'alter table "{name}_whole" rename to "{name}"')
    con.unregister("classified")
    orders = (
        ("session_key", "source_file", "line", "field"),  # number_faults.sql's order by (ties: in one line)
        RECORDS_ORDER,
        sql.sorted_by("parts"),
        sql.sorted_by("source_lines_out"),
    )
    rejects_out = pieces[4][0] if last == 0 else pl.concat(pieces[4]).sort("source_file", "line", nulls_last=False, maintain_order=True)
    if store is not None:
        for table, name in (("records_full", "records"), ("batch_parts", "parts"), ("batch_source_lines", "source_lines")):
            con.execute(f'create or replace temp view "{table}" as select * from {name}_pieces')
        return _in_order(pieces[0], orders[0]), None, None, None, rejects_out
    return (*(_in_order(chunks, order) for chunks, order in zip(pieces[:4], orders)), rejects_out)


def _in_order(chunks: list[pl.DataFrame], order: tuple[str, ...]) -> pl.DataFrame:
    """The chunks' frames of one statement as one frame, sorted by its order (ties in chunk order)."""
    return chunks[0] if len(chunks) == 1 else pl.concat(chunks, rechunk=True).sort(order, nulls_last=True, maintain_order=True)


def _chunk_of_lines(frame: pl.DataFrame, line_chunks: pl.DataFrame, last: int) -> pl.Series:
    """The chunk of each row of `frame` (lines or rejects, by file_idx and line): its line's, or the
    last chunk for a line without observations."""
    return (
        frame.select("file_idx", "line")
        .join(line_chunks, on=["file_idx", "line"], how="left", maintain_order="left")
        .get_column("chunk")
        .fill_null(last)
    )


def _classified(observations: pl.DataFrame) -> pl.DataFrame:
    """classify (per row) decoded observations; their sidechain root, set by the narrow stage's
    sidechain split (_split_sidechains), is null until then."""
    return classify(observations.with_columns(sidechain_root=pl.lit(None, pl.String)))


def _observe(
    con: duckdb.DuckDBPyConnection, objects: pl.DataFrame, *, keep_index: bool = False, elided: Elided | None = None
) -> pl.DataFrame:
    """Decode the envelope of each object (sql/batch/observations.sql); the JSON text is not copied
    through DuckDB: the result names its object by obj_idx, and a gather shares the string buffers.
    A text that is not one JSON object has no row; `keep_index` keeps obj_idx (the row of `objects`).
    With `elided`, the long strings of long texts are elided first (the result's `json` too)."""
    if elided is not None:
        objects = objects.with_columns(json=elided.reduce(objects.get_column("json")))
    # The statement decodes each object alone (no window, no aggregate): run over slices of the
    # objects, about OBSERVE_SLICE_BYTES of text each, its results concatenated are its rows over all
    # of them in the same order, and DuckDB's working memory is the slice's (returned after each).
    frames = []
    for start, end in slices.ranges(objects.get_column("json").str.len_bytes(), OBSERVE_SLICE_BYTES):
        sql.register(con, "batch_objects", objects.slice(start, end - start).with_row_index("obj_idx", offset=start))
        frames.append(sql.frame(con, "observations"))
        sql.flush(con)
    con.unregister("batch_objects")
    observations = pl.concat(frames, rechunk=True) if len(frames) != 1 else frames[0]
    del frames
    if not observations.get_column("is_object").all():
        observations = observations.filter(pl.col("is_object"))
    observations = observations.drop("is_object")
    observations = observations.with_columns(json=objects.get_column("json").gather(observations.get_column("obj_idx")))
    return observations if keep_index else observations.drop("obj_idx")


def _parts(con: duckdb.DuckDBPyConnection, records: pl.DataFrame) -> pl.DataFrame:
    """Run sql/batch/parts.sql over slices of the records, about PART_SLICE_BYTES of their JSON each, and
    concatenate the results. Each step of the statement is per record, so the rows are those of one
    run; the slices are ranges of its declared order (session_key, record_id), so the concatenation is
    in that order too. DuckDB's working memory (the blocks, their decode, its hash tables) is then the
    slice's, not the batch's."""
    keys = records.select("session_key", "record_id", size=pl.col("native").str.len_bytes()).sort(
        "session_key", "record_id", nulls_last=True
    ).select("record_id", part_slice=pl.col("size").cum_sum() // PART_SLICE_BYTES)
    slices = keys.partition_by("part_slice", maintain_order=True, include_key=False) or [keys.select("record_id")]
    frames = []
    for records_of_slice in slices:
        sql.register(con, "batch_part_records", records_of_slice)
        frames.append(sql.frame(con, "parts"))
    con.unregister("batch_part_records")
    return pl.concat(frames, rechunk=True) if len(frames) != 1 else frames[0]


def _tool_calls(con: duckdb.DuckDBPyConnection, records: pl.DataFrame, parts: pl.DataFrame) -> pl.DataFrame:
    """Run sql/batch/tool_calls.sql and attach the JSON texts it names: a model call's input (its block in
    parts) and its result's toolUseResult (its record). A join gathers them and shares the string
    buffers, where DuckDB would copy every text into its result and its sort."""
    calls = sql.frame(con, "tool_calls")
    names = [name for name in calls.columns if name != "call_part_index"]
    return (
        calls.join(
            parts.select("session_key", call_record_id="record_id", call_part_index="part_index", block_input="tool_input"),
            on=["session_key", "call_record_id", "call_part_index"], how="left", maintain_order="left",
        )
        .join(
            records.select("session_key", result_record_id="record_id", record_result="tool_use_result"),
            on=["session_key", "result_record_id"], how="left", maintain_order="left",
        )
        # a user's shell command has its own input and result (not null); a model call has neither
        .with_columns(input=pl.coalesce("input", "block_input"), result_native=pl.coalesce("result_native", "record_result"))
        .select(names)
    )


def _ordered(classified: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Number the observations by their position in the batch: `ord`, from 1, in the order of
    (file_rank, file_idx, line, sub; a null sub first), rows with equal keys in the order of
    `classified` (objects rebuilt from the agent_progress copies in two copies of a stream's file
    can share a line). ord is unique: the statements key an observation by it (observation_index.sql),
    not by its row in this batch's frame, whose rows stay in their order (recovered and rebuilt
    objects after the lines). Also returns the row of `classified` of each ord (at ord - 1), through
    which the JSON texts a statement names are gathered."""
    rows_by_ord = classified.select(
        pl.arg_sort_by("file_rank", "file_idx", "line", "sub", nulls_last=False, maintain_order=True)
    ).to_series()
    return classified.with_columns(ord=rows_by_ord.arg_sort().cast(pl.Int64) + 1), rows_by_ord


def _source_lines(
    con: duckdb.DuckDBPyConnection, classified: pl.DataFrame, rows_by_ord: pl.Series, first_ord: int = 1
) -> pl.DataFrame:
    """Run sql/batch/source_lines_out.sql and attach the JSON texts it names by native_ord."""
    return _gathered(sql.frame(con, "source_lines_out"), classified, rows_by_ord, first_ord, native="json")


def _with_texts(records: pl.DataFrame, classified: pl.DataFrame, rows_by_ord: pl.Series, first_ord: int = 1) -> pl.DataFrame:
    """Attach the JSON texts records_full names by ord."""
    return _gathered(records, classified, rows_by_ord, first_ord, native="json", tool_use_result="tool_use_result")


def _gathered(
    frame: pl.DataFrame, classified: pl.DataFrame, rows_by_ord: pl.Series, first_ord: int, **texts: str
) -> pl.DataFrame:
    """Each column `<name>_ord` of `frame` replaced by `<name>`, the column of `classified` that
    `texts` names, gathered at the rows of those observations (`rows_by_ord`, see _ordered: the row of
    ord `first_ord + i` at i, the ords of `classified` being consecutive from `first_ord`; a null ord
    gives a null text): a gather shares the string buffers, where DuckDB would copy every text into
    its result."""
    return frame.with_columns(
        classified.get_column(column).gather(rows_by_ord.gather(frame.get_column(f"{name}_ord") - first_ord)).alias(name)
        for name, column in texts.items()
    ).drop(f"{name}_ord" for name in texts)


def _rebuild_from_progress(
    con: duckdb.DuckDBPyConnection,
    observations: pl.DataFrame | None,
    narrow: pl.DataFrame,
    files_frame: pl.DataFrame,
    store: Store | None,
) -> tuple[pl.DataFrame | None, pl.DataFrame, pl.DataFrame]:
    """Rebuild subagent streams whose transcript is absent from their agent_progress copies.

    Each rebuilt stream reads as a virtual file: its objects keep the parent's line numbers,
    with positions prefixed `agent_progress:`, and its records say where they came from. The copies
    are read from the wide observations (their JSON, registered as `observations`); the rebuilt
    objects, decoded and classified, are added to the wide frame (or the store) and to the narrow one.
    """
    copies = sql.frame(con, "progress_copies")
    if copies.is_empty():
        return observations, narrow, files_frame
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
    sql.register(con, "batch_files", files_frame)
    rebuilt = _classified(_observe(con, objects))
    if store is not None:
        return None, pl.concat([narrow, _store_wide(store, rebuilt)]), files_frame
    return pl.concat([observations, rebuilt]), pl.concat([narrow, _narrow(rebuilt)]), files_frame


def _split_sidechains(
    con: duckdb.DuckDBPyConnection, observations: pl.DataFrame | None, narrow: pl.DataFrame
) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """Move inline 1.0.x sidechain objects into one stream per sidechain root: the roots are found in
    the narrow frame (sql/batch/sidechain_roots.sql), and the session_key and stream_kind of those objects
    change in the wide and in the narrow frame alike (the wide one also keeps the root). Without a
    wide frame (a store's batch), the narrow frame keeps the root for the stored rows."""
    sql.register(con, "narrow_observations", narrow)
    roots = sql.frame(con, "sidechain_roots")
    con.unregister("narrow_observations")
    if roots.is_empty():  # no inline sidechains (transcripts after 1.0.x)
        return observations, narrow
    root = pl.col("root_uuid")

    def split(frame: pl.DataFrame, **keep: pl.Expr) -> pl.DataFrame:
        return (
            frame.join(roots, on=["file_idx", "line", "sub"], how="left", nulls_equal=True, maintain_order="left")
            .with_columns(
                session_key=pl.when(root.is_not_null())
                .then(pl.col("session_key") + "/sidechain-" + root)
                .otherwise(pl.col("session_key")),
                stream_kind=pl.when(root.is_not_null()).then(pl.lit("sidechain")).otherwise(pl.col("stream_kind")),
                **keep,
            )
            .drop("root_uuid")
        )

    if observations is None:
        return None, split(narrow, sidechain_root=root)
    return split(observations, sidechain_root=root), split(narrow)


def _rejects_out(
    lines: pl.DataFrame, rejects: pl.DataFrame, files_frame: pl.DataFrame, foreign: pl.Series, files: list[Stream]
) -> pl.DataFrame:
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


def streams_frame(files: list[Stream]) -> pl.DataFrame:
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
