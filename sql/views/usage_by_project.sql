-- usage_by_project: one row per project (working directory of the root session): tokens and cost;
-- sessions counts the root sessions.
-- reads: inference_costs
-- cost_usd adds the priced inferences only: unpriced_inferences counts the others and
-- unpriced_models names their models. is_lower_bound: some output counts are placeholders.
with costs as (
    select * from inference_costs
),

final as (
    select
        project,
        count(distinct root_session_key) as sessions,
        count(*) as inferences,
        cast(sum(input_uncached_tokens) as bigint) as input_uncached_tokens,
        cast(sum(cache_read_tokens) as bigint) as cache_read_tokens,
        cast(sum(cache_write_tokens) as bigint) as cache_write_tokens,
        cast(sum(output_total_tokens) as bigint) as output_total_tokens,
        cast(sum(total_tokens) as bigint) as total_tokens,
        sum(cost_usd) as cost_usd,
        count(*) filter (where not is_priced) as unpriced_inferences,
        coalesce(list_sort(list(distinct model) filter (where not is_priced)), []) as unpriced_models,
        count(*) filter (where not usage_complete) as incomplete_inferences,
        bool_or(is_cost_lower_bound) as is_lower_bound,
    from costs
    group by project
)

select * from final
order by cost_usd desc nulls last, project
