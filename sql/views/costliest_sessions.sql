-- costliest_sessions: one row per root session among the 25 costliest (subagents included),
-- ranked by cost_usd; ties keep the session key order.
-- reads: usage_by_session
-- cost_usd adds priced inferences only: a session with unpriced_models may cost more.
with sessions as (
    select * from usage_by_session
),

ranked as (
    select
        row_number() over (order by cost_usd desc nulls last, root_session_key) as cost_rank,
        *,
        cost_usd / nullif(sum(cost_usd) over (), 0) as share_of_cost,
    from sessions
),

final as (
    select
        cost_rank,
        root_session_key,
        project,
        title,
        first_prompt,
        models,
        inferences,
        total_tokens,
        output_total_tokens,
        cost_usd,
        share_of_cost,
        unpriced_models,
        is_lower_bound,
        first_response_at,
        last_response_at,
    from ranked
    where cost_rank <= 25
)

select * from final
order by cost_rank
