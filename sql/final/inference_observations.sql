-- inference_observations: one row per (stream, inference) across the whole output, with the
-- one observation per inference_id that inferences reports.
-- Selection policy: an observation with a stop reason first (its usage is final), then the
-- largest output count (the most advanced streaming snapshot), then session_key and position
-- (deterministic). The other observations stay as native evidence.
-- A Codex response copied into a fork or a subagent file is the same inference as in its parent (its
-- ID is the response_id of its token_usage_record, else derived from its token_count usage pair): the
-- parent's observation is taken first (codex-format.md §9.6, parents first; §14.4).
-- observation_count (the streams of each inference) is not a column of the table (its part file
-- holds the declared ones): inferences reads it here, counted in the same window partitions, where a
-- join of a count by inference_id grew faster than the archive and overran the final stage's memory
-- limit (docs/performance.md, "The final stage at scale").
-- reads: inference_candidates, lineage_evidence, session_streams
with candidates as (
    select * from inference_candidates
),

codex_children as (
    select child_session_key as session_key from lineage_evidence where relation = 'forked_from'
    union
    select session_key from session_streams where stream_kind = 'subagent' and producer_source = 'codex-rollout-jsonl'
),

ranked as (
    select
        c.*,
        row_number() over (
            partition by c.inference_id
            order by c.stop_reason is not null desc, c.output_total_tokens desc nulls last,
                c.usage_source in ('token_count', 'token_usage_record') and k.session_key is not null, c.session_key,
                c.stream_ord
        ) = 1 as is_selected,
        count(*) over (partition by c.inference_id) as observation_count,
    from candidates as c
    left join codex_children as k using (session_key)
),

final as (
    select * exclude (stream_ord) from ranked
)

select * from final
order by inference_id, session_key
