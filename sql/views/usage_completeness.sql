-- usage_completeness: one row per (agent, model): how much of its output and cost totals is a
-- lower bound.
-- reads: inference_costs
-- An inference with usage_complete false kept only a streaming placeholder of its output count
-- (Claude Code never wrote the final line): its output_total_tokens, and so its cost, are lower
-- bounds. *_lower_bound_share: the part of each total that comes from such inferences.
-- A Codex response's usage is final (usage_complete true): its rows count no incomplete inference.
-- from_agent_progress: usage read from copies in a parent's progress lines (subagent file absent).
with costs as (
    select * from inference_costs
),

final as (
    select
        agent,
        model,
        count(*) as inferences,
        count(*) filter (where not usage_complete) as incomplete_inferences,
        count(*) filter (where not usage_complete) / count(*) as incomplete_share,
        count(*) filter (where usage_source = 'agent_progress') as from_agent_progress,
        cast(sum(output_total_tokens) as bigint) as output_total_tokens,
        coalesce(cast(sum(output_total_tokens) filter (where not usage_complete) as bigint), 0) as output_tokens_lower_bound,
        coalesce(cast(sum(output_total_tokens) filter (where not usage_complete) as bigint), 0)
            / nullif(cast(sum(output_total_tokens) as bigint), 0) as output_lower_bound_share,
        sum(cost_usd) as cost_usd,
        -- null where the cost is (an unpriced model: unpriced_models), not 0
        case when sum(cost_usd) is not null
            then coalesce(sum(cost_usd) filter (where not usage_complete), 0) end as cost_usd_lower_bound,
        coalesce(sum(cost_usd) filter (where not usage_complete), 0)
            / nullif(sum(cost_usd), 0) as cost_lower_bound_share,
    from costs
    group by agent, model
)

select * from final
order by inferences desc, agent, model
