"""Workspace, version control, file changes, checkpoints and usage summaries.

Each table here is built per batch by sql/batch/workspace/<table name>.sql (see batch/pipeline.py).
"""

from __future__ import annotations

import pyarrow as pa

from batch.schema.base import BOOL, I64, JSON, STR, STRS, TS, Table, col

F64 = pa.float64()

VCS_EVENTS = Table(
    "vcs_events",
    "one row per version-control fact: a component of a gitOperation on a tool result, "
    "or a distinct pr-link of a stream",
    "Commits, pushes, branch operations and pull requests (registry entry, Workspace and VCS). "
    "gitOperation facts have evidence parsed_output (Claude Code parsed the command output); "
    "pr-link facts have evidence reported. A pr-link line is re-written at each exit, so a "
    "repeated identical link is one row (its repetitions are counted in observation_count).",
    (
        col("record_id", STR, "record holding the fact: the tool result record (gitOperation) or the "
            "first pr-link line carrying this link"),
        col("session_key", STR, "stream of the record"),
        col("call_id", STR, "tool_use.id of the call whose result carries the gitOperation; null for pr-link"),
        col("seq", I64, "seq of the record in its stream (records.seq)"),
        col("action", STR, "commit, push, branch, pr_open, pr_update, pr_merge, pr_comment, pr_close, "
            "pr_reopen, pr_ready, pr_draft or pr_link; null when the native value has no mapping "
            "(for example pr.action auto-merge-enabled, or an unknown gitOperation key): see native_action"),
        col("evidence", STR, "parsed_output (gitOperation: Claude Code parsed the command output) or "
            "reported (pr-link)"),
        col("native_field", STR, "where the fact was read: gitOperation.<key> (commit, push, branch, pr, ...) "
            "or pr-link"),
        col("native_action", STR, "the native value the action comes from: commit.kind (committed, amended, "
            "cherry-picked), branch.action (merged, rebased) or pr.action; null for push and pr-link"),
        col("tool_name", STR, "name of the tool whose result carries the gitOperation (Bash); null for pr-link"),
        col("repository", STR, "repository: pr-link prRepository; for a gitOperation pr, the <owner>/<repo> "
            "part of pr.url"),
        col("branch", STR, "branch: commit.branch, push.branch or branch.ref"),
        col("commit_id", STR, "commit SHA as parsed (gitOperation commit.sha)"),
        col("pr_number", I64, "pull request number: pr.number or pr-link prNumber"),
        col("pr_url", STR, "pull request URL: pr.url or pr-link prUrl"),
        col("occurred_at", TS, "timestamp of the record (records.timestamp)"),
        col("observation_count", I64, "lines reporting this fact: 1 for gitOperation; for pr-link, how many "
            "pr-link lines of the stream repeat this exact link"),
        col("native", JSON, "the native object: the gitOperation component (e.g. gitOperation.commit) or "
            "the first pr-link line", json=True),
    ),
)

FILE_CHANGES = Table(
    "file_changes",
    "one row per file change fact: a successful Edit/Write/MultiEdit/NotebookEdit call, a file of a "
    "Bash result's bashEditDiff, or an edited_text_file attachment",
    "File changes with their cause (registry entry, Workspace and VCS). Every Edit, Write, MultiEdit and "
    "NotebookEdit call whose result is present and not an error is a change by the model, also when the "
    "transcript keeps no toolUseResult (2.1.x subagent files). edited_text_file is a change by someone "
    "else that Claude Code observed. bashEditDiff lists the files a Bash command changed: one row per "
    "file, with moreFiles normalized as the registry says.",
    (
        col("record_id", STR, "record holding the fact: the tool result record (for a Codex FileChange item, the "
            "result of the call it names, else the item's own record), or the attachment record"),
        col("session_key", STR, "stream of the record"),
        col("call_id", STR, "tool_use.id of the call that caused the change; null for edited_text_file"),
        col("seq", I64, "seq of the record in its stream (records.seq)"),
        col("file_index", I64, "0-based index of the file within the record (bashEditDiff lists several)"),
        col("source", STR, "where the fact was read: tool_result (Edit/Write/MultiEdit/NotebookEdit), "
            "bash_edit_diff (toolUseResult.bashEditDiff), edited_text_file (attachment) or file_change (a Codex "
            "paginated thread's FileChange item, one row per path)"),
        col("tool_name", STR, "name of the tool whose call caused the change; null for edited_text_file"),
        col("path", STR, "file path: filePath of the result (else input file_path or notebook_path), a "
            "bashEditDiff changedFiles/files[].filePath entry, or the attachment's filename; null for a "
            "bashEditDiff that lists no file but reports more files"),
        col("change_kind", STR, "edit (Edit, MultiEdit), create or update (Write, from its result type), "
            "write (Write without a result type), notebook_edit, bash_edit (a bashEditDiff file), create or "
            "delete (a bashEditDiff file flagged created or deleted), external_edit (edited_text_file); create, "
            "delete or update for a FileChange path of type add, delete or update"),
        col("cause_actor", STR, "who caused the change: model (a tool call) or external (edited_text_file: "
            "a change made outside Claude Code)"),
        col("is_observed", BOOL, "true when Claude Code observed the change rather than made it "
            "(edited_text_file, registry cause.observed); null otherwise"),
        col("is_modified_by_user", BOOL, "userModified of the result (the user edited the proposed change "
            "before accepting it); registry modifiedByUser; null when not recorded"),
        col("more_files", BOOL, "bashEditDiff.moreFiles normalized: a boolean as recorded; a nonnegative "
            "integer count maps to count > 0; null for negative or nonintegral values and when absent"),
        col("more_files_count", I64, "bashEditDiff.moreFiles when it is a nonnegative integer count "
            "(registry com.anthropic.claude-code/moreFilesCount)"),
        col("more_files_native", JSON, "bashEditDiff.moreFiles as recorded (kept also when it cannot be "
            "normalized)", json=True),
        col("changed_at", TS, "timestamp of the record"),
        col("native", JSON, "the native object: the toolUseResult (tool_result; null when the transcript "
            "kept none), the bashEditDiff object, the attachment, or a FileChange path's change object", json=True),
    ),
)

WORKSPACE_STATES = Table(
    "workspace_states",
    "one row per workspace state change: the first cwd of a stream and each cwd change between "
    "consecutive records, each environment attachment, each worktree-state value change, each "
    "relocated record, and each subagent sidecar naming a worktree",
    "Working directory, added roots and worktree state (registry entry, Workspace and VCS: "
    "environment.changes of workingDirectory -> workspace_state.cwd; added working directories -> "
    "declaration.roots; isWorktree -> workspace_state.worktree.linked).",
    (
        col("record_id", STR, "record holding the state; null for a sidecar row (the .meta.json is not a record)"),
        col("session_key", STR, "stream the state applies to"),
        col("seq", I64, "seq of the record in its stream. A sidecar row has no transcript position: it is the "
            "stream's snapshot tail (a current state), ordered after every record with seq = last record seq + 1"),
        col("source", STR, "record.cwd (the envelope cwd of a record), environment.snapshot, "
            "environment.changes (environment attachment), worktree-state, relocated, or sidecar.worktreePath"),
        col("cwd", STR, "working directory: record cwd, environment workingDirectory, or relocatedCwd; null "
            "when the source does not state it"),
        col("previous_cwd", STR, "for record.cwd rows: the cwd of the previous record of the stream that "
            "had one (null at the stream's first cwd)"),
        col("roots", STRS, "additional working directories declared (environment additionalWorkingDirectories); "
            "null when not recorded"),
        col("is_worktree_linked", BOOL, "the session works in a linked git worktree: environment isWorktree, "
            "true for a worktree-state with a worktreeSession and for a sidecar worktreePath, false for a "
            "worktree-state whose worktreeSession is null (left the worktree); null when not recorded"),
        col("worktree_path", STR, "worktree directory: worktreeSession.worktreePath or the sidecar worktreePath"),
        col("git_branch", STR, "branch at that point: the record's gitBranch, or worktreeSession.worktreeBranch"),
        col("recorded_at", TS, "timestamp of the record"),
        col("native", JSON, "the native object: the record (record.cwd, relocated), the environment "
            "attachment, the worktree-state line, or the sidecar", json=True),
    ),
)

CHECKPOINT_FILES = Table(
    "checkpoint_files",
    "one row per (checkpoint record, tracked file); a snapshot tracking no file has one row with a "
    "null path",
    "File-history checkpoints (registry entry: file-history-snapshot -> checkpoint with kind snapshot "
    "and files {path, version, blob}). A snapshot update repeats every file tracked so far. "
    "file-history-delta lines, which the entry does not name, give no row: they are records of kind unknown.",
    (
        col("record_id", STR, "the file-history-snapshot record"),
        col("session_key", STR, "stream of the record"),
        col("seq", I64, "seq of the record in its stream (records.seq)"),
        col("checkpoint_kind", STR, "checkpoint kind: snapshot (file-history backups for rewind)"),
        col("native_type", STR, "file-history-snapshot"),
        col("message_id", STR, "uuid of the user prompt the checkpoint belongs to (snapshot.messageId): "
            "a reference, not an ID"),
        col("message_record_id", STR, "record holding that uuid in the stream; null when not in the capture"),
        col("trigger_message_id", STR, "top-level messageId: equal to message_id for a new snapshot; for an "
            "update or a delta, the uuid of the (assistant) line whose edit added the backup"),
        col("trigger_record_id", STR, "record holding trigger_message_id in the stream"),
        col("is_snapshot_update", BOOL, "isSnapshotUpdate: the line re-writes the snapshot of message_id; "
            "null for a delta"),
        col("file_index", I64, "0-based index of the file in trackedFileBackups; null for an empty snapshot"),
        col("path", STR, "tracked file path (the trackedFileBackups key, or a delta's trackingPath)"),
        col("version", I64, "backup version"),
        col("blob", STR, "backupFileName (<hash>@v<n>) under ~/.claude/file-history/<sessionId>/; null when "
            "the file did not exist yet"),
        col("backup_at", TS, "when the file was backed up (backupTime)"),
        col("snapshot_at", TS, "snapshot.timestamp (a delta's timestamp)"),
        col("native", JSON, "the file's backup object (an empty snapshot: the snapshot object)", json=True),
    ),
)

USAGE_SUMMARIES = Table(
    "usage_summaries",
    "one row per cost-state record",
    "Claude Code's own running totals (registry entry, Notes: cost-state totals map to a usage_summary "
    "with scope session, cumulative true and includesChildren null). Each line is a cumulative "
    "snapshot: the latest one of a stream (is_latest) holds the totals. These totals are not joined "
    "to inferences and are never added to them.",
    (
        col("record_id", STR, "the cost-state record"),
        col("session_key", STR, "stream of the record"),
        col("seq", I64, "seq of the record in its stream (records.seq)"),
        col("scope", STR, "what the totals cover: session (Claude Code's running totals for the session)"),
        col("is_cumulative", BOOL, "true: the totals accumulate over the session process"),
        col("includes_children", BOOL, "always null: the transcript does not establish whether subagent "
            "usage is included (the registry maps includesChildren: null; inclusion requires evidence)"),
        col("is_latest", BOOL, "the last cost-state record of the stream"),
        col("cost_usd", F64, "totalCostUSD as computed by Claude Code"),
        col("input_uncached_tokens", I64, "sum of modelUsage.*.inputTokens; null when no model reports it"),
        col("output_total_tokens", I64, "sum of modelUsage.*.outputTokens"),
        col("cache_read_tokens", I64, "sum of modelUsage.*.cacheReadInputTokens"),
        col("cache_write_tokens", I64, "sum of modelUsage.*.cacheCreationInputTokens"),
        col("thinking_tokens", I64, "sum of modelUsage.*.thinkingTokens (reported beside outputTokens; "
            "whether output includes it is not established)"),
        col("web_search_requests", I64, "sum of modelUsage.*.webSearchRequests"),
        col("models", STRS, "modelUsage keys, in recorded order (empty when modelUsage is empty)"),
        col("duration_ms", I64, "totalDuration: wall time"),
        col("api_duration_ms", I64, "totalAPIDuration"),
        col("api_duration_without_retries_ms", I64, "totalAPIDurationWithoutRetries"),
        col("tool_duration_ms", I64, "totalToolDuration"),
        col("lines_added", I64, "totalLinesAdded"),
        col("lines_removed", I64, "totalLinesRemoved"),
        col("has_unknown_model_cost", BOOL, "hasUnknownModelCost: a model had no known price, so cost_usd is partial"),
        col("started_at", TS, "startTime (epoch ms): start of the process the totals count from"),
        col("native", JSON, "the cost-state line, verbatim (per-model detail in modelUsage)", json=True),
    ),
)

TABLES: tuple[Table, ...] = (VCS_EVENTS, FILE_CHANGES, WORKSPACE_STATES, CHECKPOINT_FILES, USAGE_SUMMARIES)
