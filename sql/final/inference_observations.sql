-- inference_observations: one row per (stream, inference) across the whole output, with the
-- one observation per inference_id that inferences reports.
-- Selection policy: an observation with a stop reason first (its usage is final), then the
-- largest output count (the most advanced streaming snapshot), then session_key and position
-- (deterministic). The other observations stay as native evidence.
-- reads: inference_candidates
with candidates as (
    select * from inference_candidates
),

ranked as (
    select
        *,
        row_number() over (
            partition by inference_id
            order by stop_reason is not null desc, output_total_tokens desc nulls last, session_key, stream_ord
        ) = 1 as is_selected,
    from candidates
),

final as (
    select * exclude (stream_ord) from ranked
)

select * from final
order by inference_id, session_key
