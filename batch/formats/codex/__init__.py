"""The codex-rollout-jsonl converter: OpenAI Codex CLI rollout files -> frames of the core tables.

The flow (the Codex rollout reference, codex-format.md; docs/asr-tables.md "Codex"):
1. `lines.read_lines` splits the files; `sql/batch/codex/codex_lines.sql` decodes each line once into its
   envelope, the payload fields the mapping reads and its content blocks (over the whole batch in
   DuckDB, no loop over lines); `converter._blocks` lists the blocks, one row each.
   The first session_meta of each file and its token_usage_record lines are decoded a second time
   for the fields that line decode does not read (sql/batch/codex/codex_rollouts.sql,
   codex_usage_records.sql); `rollouts.plan` orders a thread's rollout files (thread/revert) and
   tells the history each one continues (history_base, §14.5).
2. `classify.lines` gives every line its fate: a record (its kind, author, origin), a duplicate (an
   event_msg copy of a response item's text, a token_count repeating an earlier pair), or a reject;
   in a paginated thread (§14.3) `paginated.py` says which of an item_completed item and its response
   copy is the record, and the kinds of the newer line kinds (§14.4); `rollouts.mark` marks a reverted
   branch's records, `usage.select` the usage each line gives (a token_usage_record's response, else a
   token_count's pair where its file has no records, §14.4).
3. `tables.py` builds records, parts, source_lines, rejects, tool_calls (with the exit code and run
   time of a command, §5-§6), session_events (turn starts and ends as the state running and idle)
   and the work tables the final stage reads: session_streams, inference_candidates (one response
   per response_id of a token_usage_record, else per distinct pair of cumulative and last usage,
   §9.6: `usage.py`), lineage_evidence (forked_from_id; history_base: `rollouts.py`), source_losses
   (encrypted reasoning, shell exit codes not read) and first_prompts (by sql/batch/sessions/first_prompts.sql,
   as for Claude Code); `items.py` adds the rows of a paginated thread's items (parts, calls and their
   outcomes, file_changes by sql/batch/codex/codex_file_changes.sql, plans, session events, lineage).
"""

from batch.formats.codex.converter import FORMAT, convert

__all__ = ["FORMAT", "convert"]
