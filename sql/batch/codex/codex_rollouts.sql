-- codex_rollouts: one row per Codex rollout file of a batch: what its first session_meta says of the
-- history it continues (reference codex-format.md §14.3, §14.5). Read by formats/codex/rollouts.py.
-- reads: codex_fact_lines
-- history_base {thread_id, end_ordinal_exclusive, end_byte_offset}: the file's history is the lines of
-- the rollout `thread_id` names (a rollout ID, not a thread ID) before that ordinal, which end at that
-- byte offset of its plain bytes; the file does not copy them. A paginated fork's file points into its
-- parent's rollout; thread/revert's next rollout of a thread into the thread's previous one.
-- forked_from_id and forked_from_ordinal_exclusive: a fork's parent thread and its logical cut there.
with metas as (
    select file_idx, text
    from codex_fact_lines
    where line_type = 'session_meta'
    qualify row_number() over (partition by file_idx order by line) = 1
),

decoded as (
    select
        file_idx,
        -- an enveloped line's payload, else the legacy first line itself
        coalesce(json_extract(text, '$.payload'), json(text)) as p,
    from metas
),

final as (
    select
        file_idx,
        p ->> '$.history_mode' as history_mode,
        p ->> '$.history_base.thread_id' as base_rollout_id,
        json_bigint(p -> '$.history_base.end_ordinal_exclusive') as base_end_ordinal,
        json_bigint(p -> '$.history_base.end_byte_offset') as base_end_byte_offset,
        p ->> '$.forked_from_id' as fork_parent_id,
        json_bigint(p -> '$.forked_from_ordinal_exclusive') as forked_from_ordinal,
    from decoded
)

select * from final
order by file_idx
