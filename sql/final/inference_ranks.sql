-- inference_ranks: for each row of inference_candidates, in the order of inference_rows (a total
-- order), whether it is the observation inferences reports (is_selected) and how many streams
-- observed its inference (observation_count). Narrow: the window sorts these columns, not whole rows;
-- inference_observations puts them beside inference_rows by position (docs/performance.md, "The final
-- stage at scale").
-- Selection policy: an observation with a stop reason first (its usage is final), then the
-- largest output count (the most advanced streaming snapshot), then session_key and position
-- (deterministic). The other observations stay as native evidence.
-- A Codex response copied into a fork or a subagent file is the same inference as in its parent (its
-- ID is the response_id of its token_usage_record, else derived from its token_count usage pair): the
-- parent's observation is taken first (codex-format.md §9.6, parents first; §14.4).
-- reads: inference_candidates, lineage_evidence, session_streams
with codex_children as (
    select child_session_key as session_key from lineage_evidence where relation = 'forked_from'
    union
    select session_key from session_streams where stream_kind = 'subagent' and producer_source = 'codex-rollout-jsonl'
),

ranked as (
    select
        c.inference_id, c.session_key, c.stream_ord,
        row_number() over (
            partition by c.inference_id
            order by c.stop_reason is not null desc, c.output_total_tokens desc nulls last,
                c.usage_source in ('token_count', 'token_usage_record') and k.session_key is not null, c.session_key,
                c.stream_ord
        ) = 1 as is_selected,
        count(*) over (partition by c.inference_id) as observation_count,
    from inference_candidates as c
    left join codex_children as k using (session_key)
)

select is_selected, observation_count from ranked
order by inference_id, session_key, stream_ord
