-- usage_by_session: one row per root session (root_session_key), its subagents, sidechains and
-- spawned threads included: tokens, cost, models and time span. A fork is a root of its own.
-- reads: inference_costs, sessions
-- title and first_prompt: the root session's (sessions), to tell the sessions apart.
-- cost_usd adds the priced inferences only (unpriced_inferences, unpriced_models say what is
-- missing). is_lower_bound: some output counts are placeholders.
with costs as (
    select * from inference_costs
),

roots as (
    select session_key as root_session_key, title, first_prompt from sessions
),

totals as (
    select
        root_session_key,
        any_value(project) as project,
        list_sort(list(distinct model)) as models,
        count(distinct session_key) as streams,
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
        min(responded_at) as first_response_at,
        max(responded_at) as last_response_at,
    from costs
    group by root_session_key
),

final as (
    select
        t.root_session_key,
        t.project,
        r.title,
        r.first_prompt,
        t.models,
        t.streams,
        t.inferences,
        t.input_uncached_tokens,
        t.cache_read_tokens,
        t.cache_write_tokens,
        t.output_total_tokens,
        t.total_tokens,
        t.cost_usd,
        t.unpriced_inferences,
        t.unpriced_models,
        t.incomplete_inferences,
        t.is_lower_bound,
        t.first_response_at,
        t.last_response_at,
    from totals as t
    left join roots as r using (root_session_key)
)

select * from final
order by root_session_key
