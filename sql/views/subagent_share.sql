-- subagent_share: one row per root session (root_session_key) with inferences: how much of its
-- tokens and cost its subagents, sidechains and spawned threads spent (is_subagent: every stream of
-- its tree but itself).
-- reads: inference_costs
-- Shares are null when the total is 0 or null; cost shares count priced inferences only.
with costs as (
    select * from inference_costs
),

final as (
    select
        root_session_key,
        any_value(project) as project,
        count(distinct session_key) filter (where is_subagent) as subagent_streams,
        count(*) as inferences,
        count(*) filter (where is_subagent) as subagent_inferences,
        cast(sum(total_tokens) as bigint) as total_tokens,
        cast(sum(case when is_subagent then total_tokens else 0 end) as bigint) as subagent_tokens,
        cast(sum(case when is_subagent then total_tokens else 0 end) as bigint) / nullif(cast(sum(total_tokens) as bigint), 0)
            as subagent_token_share,
        sum(cost_usd) as cost_usd,
        sum(case when is_subagent then cost_usd else 0 end) as subagent_cost_usd,
        sum(case when is_subagent then cost_usd else 0 end) / nullif(sum(cost_usd), 0)
            as subagent_cost_share,
    from costs
    group by root_session_key
)

select * from final
order by root_session_key
