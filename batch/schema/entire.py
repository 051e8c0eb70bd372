"""Tables of what only Entire records: checkpoints, their sessions' metadata, and commits naming them.

Written once per run from the checkpoint scan (batch/formats/entire_checkpoint.py); empty without a
Git repository among the inputs.
"""

from __future__ import annotations

import pyarrow as pa

from batch.schema.base import BOOL, I64, JSON, STR, STRS, TS, Table
from batch.schema.base import col as _c

F64 = pa.float64()

CHECKPOINTS = Table(
    "checkpoints",
    "one row per checkpoint read (one per checkpoint ID)",
    "Entire checkpoints and where each was read; the root metadata.json (CheckpointSummary) in columns. For "
    "layout `v1+v2` the aggregates are recomputed from the union of the sessions (v1's summary counts only "
    "its own); `metadata` keeps v1's summary as stored.",
    (
        _c("checkpoint_id", STR, "12 lowercase hex characters, or a ULID (26 characters)"),
        _c("repository", STR, "name of the repository folder read"),
        _c("ref", STR, "reference read: refs/heads/entire/checkpoints/v1, a remote-tracking copy, "
           "refs/entire/checkpoints/<shard>/<id>, or refs/entire/checkpoints/v2/main"),
        _c("commit_id", STR, "tip commit of that reference"),
        _c("tree_path", STR, "path of the checkpoint from the commit root: `<id[:2]>/<id[2:]>` on the branch, "
           "empty under a per-checkpoint ref"),
        _c("shadowed_refs", STRS, "other references holding the same ID, not read (routing rules)"),
        _c("layout", STR, "where the sessions were read: `v1` (the v1 branch or a per-checkpoint ref), `v2` "
           "(refs/entire/checkpoints/v2/*, no other layout holds the ID), `v1+v2` (v2 added sessions v1 lacks)"),
        _c("cli_version", STR, "Entire CLI version that wrote the checkpoint (may be a git-describe string or `dev`)"),
        _c("strategy", STR, "manual-commit or auto-commit"),
        _c("branch", STR, "branch at creation; null when detached or not recorded"),
        _c("commit_sha", STR, "anchor commit, only for checkpoints made by `entire import`"),
        _c("checkpoints_count", I64, "Entire's prompt-window count ('steps'), the sum of the sessions'; not a count "
           "of records"),
        _c("files_touched", STRS, "files the sessions changed, their sorted union (null in old data)"),
        _c("session_count", I64, "session folders read (for layout `v1+v2`, of both layouts)"),
        _c("token_usage_version", I64, "2: every session's token_usage is a per-checkpoint delta; null: legacy, "
           "possibly cumulative"),
        _c("token_usage", JSON, "aggregate token_usage of the sessions: as stored; for layout `v1+v2` the sums of "
           "the sessions' input, cache creation, cache read and output tokens and API calls", json=True),
        _c("combined_attribution", JSON, "combined_attribution as stored; for layout `v1+v2` v1's, else v2's "
           "when every v2 session was readable", json=True),
        _c("metadata", JSON, "the root metadata.json as read (v1's for layout `v1+v2`); null when absent or "
           "corrupt (see losses)", json=True),
    ),
    stage="final",
)

CHECKPOINT_SESSIONS = Table(
    "checkpoint_sessions",
    "one row per (checkpoint, session folder)",
    "Session metadata.json of every checkpoint read, whether or not its transcript was selected. Token counts "
    "are Entire's own (input_tokens excludes cache); there is no redaction count in any Entire version.",
    (
        _c("checkpoint_id", STR, "checkpoint holding the folder"),
        _c("session_folder", STR, "folder name in the checkpoint: 0, 1, ... (not always contiguous)"),
        _c("session_key", STR, "the session across checkpoints: session_id without a legacy `YYYY-MM-DD-` prefix; "
           "`<checkpoint_id>/<folder>` when metadata.json is unreadable"),
        _c("session_id", STR, "session_id as stored (legacy ones are date-prefixed)"),
        _c("layout", STR, "`v1`, or `v2` for a session read from refs/entire/checkpoints/v2/main and the raw "
           "transcript of its /full ref"),
        _c("is_selected", BOOL, "this checkpoint's copy is the one converted (the newest, unless checkpoints are combined)"),
        _c("agent", STR, "agent display name (Claude Code, Codex, Gemini CLI, ...); null in legacy data"),
        _c("model", STR, "model recorded by Entire; null when empty"),
        _c("created_at", TS, "when Entire wrote this checkpoint of the session (UTC)"),
        _c("turn_id", STR, "Entire turn ID: correlates checkpoints of one agent turn across commits"),
        _c("cli_version", STR, "Entire CLI version"),
        _c("strategy", STR, "manual-commit or auto-commit"),
        _c("branch", STR, "branch at creation"),
        _c("kind", STR, "session kind when not a normal one (agent_review, agent_investigate, imported)"),
        _c("checkpoint_transcript_start", I64, "first full.jsonl line (0-based) this checkpoint covers "
           "(checkpoint_transcript_start, else transcript_lines_at_start); null when not written (0)"),
        _c("compact_transcript_start", I64, "first transcript.jsonl line (0-based) this checkpoint covers; null "
           "(absent) means the file holds only this checkpoint's part"),
        _c("token_transcript_start", I64, "start of the token window in full.jsonl (token_usage_version 2)"),
        _c("transcript_identifier_at_start", STR, "last transcript entry ID before this checkpoint "
           "(legacy transcript_uuid_at_start)"),
        _c("input_tokens", I64, "token_usage.input_tokens: fresh input, cache excluded"),
        _c("cache_creation_tokens", I64, "token_usage.cache_creation_tokens (cache writes)"),
        _c("cache_read_tokens", I64, "token_usage.cache_read_tokens"),
        _c("output_tokens", I64, "token_usage.output_tokens"),
        _c("thinking_tokens", I64, "token_usage.thinking_tokens (part of output_tokens), when recorded"),
        _c("api_call_count", I64, "token_usage.api_call_count"),
        _c("token_usage", JSON, "token_usage as stored, subagent_tokens and cost included", json=True),
        _c("agent_lines", I64, "initial_attribution.agent_lines"),
        _c("human_added", I64, "initial_attribution.human_added"),
        _c("human_modified", I64, "initial_attribution.human_modified"),
        _c("human_removed", I64, "initial_attribution.human_removed"),
        _c("total_committed", I64, "initial_attribution.total_committed"),
        _c("agent_percentage", F64, "initial_attribution.agent_percentage (metric_version 2: of changed lines; "
           "absent: of additions)"),
        _c("attribution_metric_version", I64, "initial_attribution.metric_version"),
        _c("attribution", JSON, "initial_attribution as stored", json=True),
        _c("summary_intent", STR, "summary.intent (AI-written summary)"),
        _c("summary_outcome", STR, "summary.outcome"),
        _c("summary", JSON, "summary as stored (learnings, friction, open_items)", json=True),
        _c("files_touched", STRS, "files the session changed"),
        _c("transcript_path", STR, "tree path of full.jsonl, when the folder holds one"),
        _c("transcript_chunks", I64, "extra chunks full.jsonl.001, ... joined after it"),
        _c("compact_transcript_path", STR, "tree path of transcript.jsonl, when present"),
        _c("task_count", I64, "subagent records (tasks/<tool use id>/) of this session"),
        _c("metadata", JSON, "the session metadata.json as read; null when absent or corrupt (see losses)", json=True),
    ),
    stage="final",
)

CHECKPOINT_COMMITS = Table(
    "checkpoint_commits",
    "one row per (commit, checkpoint) named by an Entire-Checkpoint trailer",
    "Commits of every branch (Entire's own excepted) whose message names a checkpoint. Entire reports this "
    "link; it is not an observed commit action.",
    (
        _c("commit_id", STR, "full commit ID"),
        _c("checkpoint_id", STR, "checkpoint the trailer names"),
        _c("trailer_index", I64, "0-based position among the commit's trailers"),
        _c("is_checkpoint_present", BOOL, "the repository holds the checkpoint"),
    ),
    stage="final",
)

# What the output holds of each repository's Entire storage, so that a later asr-batch converts its
# sessions again without the repository (batch/sources/entire/held.py; docs/asr-tables.md, "An output is
# a source"): one part per repository, replaced when the repository is read again.
GIT_REFS = Table(
    "git_refs",
    "one row per (repository, reference) the checkpoint scan read",
    "The references of Entire's storage as last read (entire/checkpoints/v1 and its remote-tracking copies, "
    "the per-checkpoint refs, the v2 refs) with the object each named. Not an ASR table: the output's copy of "
    "what its conversion read, with git_objects.",
    (
        _c("repository", STR, "name of the repository folder read (checkpoints.repository)"),
        _c("ref", STR, "full reference name"),
        _c("object_id", STR, "the object the reference named (a commit, or an annotated tag)"),
    ),
    stage="held",
)

GIT_OBJECTS = Table(
    "git_objects",
    "one row per (repository, Git object) the conversion read",
    "Git objects verbatim, each its type and bytes as Git stores them (so each keeps its ID): everything "
    "reachable from git_refs down to blobs, each commit without its history; and the commits whose message "
    "carries an Entire-Checkpoint trailer, without their trees. Not an ASR table.",
    (
        _c("repository", STR, "name of the repository folder read"),
        _c("object_id", STR, "the object's ID (SHA-1 of its type, size and bytes)"),
        _c("kind", STR, "commit, tree, blob or tag"),
        _c("read_as", STR, "`storage`: under a reference of git_refs; `trailer`: a commit of the code history "
           "naming a checkpoint"),
        _c("data", pa.large_binary(), "the object's bytes, as `git cat-file <kind> <object_id>` prints them",
           long=True),
    ),
    stage="held",
)

TABLES: tuple[Table, ...] = (CHECKPOINTS, CHECKPOINT_SESSIONS, CHECKPOINT_COMMITS)
HELD_TABLES: tuple[Table, ...] = (GIT_REFS, GIT_OBJECTS)
