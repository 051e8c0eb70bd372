-- usage_by_day: one row per (local day of the response, agent, model): tokens and cost.
-- reads: inference_costs
-- Local days are those of the time zone in the variable asr_timezone (UTC when it is not set:
-- `set variable asr_timezone = 'Europe/Paris'`, or --timezone of asr-batch sql and report); the
-- price of a response is still that of its UTC day (inference_costs).
-- cost_usd is null for a model without a price that day (unpriced_inferences counts them).
-- incomplete_inferences have a placeholder output count: output_total_tokens and cost_usd are
-- then lower bounds (is_lower_bound).
with costs as (
    select * from inference_costs
),

located as (
    select
        * exclude (day),
        asr_local_day(responded_at) as day,
    from costs
),

final as (
    select
        day,
        agent,
        model,
        count(*) as inferences,
        cast(sum(input_uncached_tokens) as bigint) as input_uncached_tokens,
        cast(sum(cache_read_tokens) as bigint) as cache_read_tokens,
        cast(sum(cache_write_tokens) as bigint) as cache_write_tokens,
        cast(sum(output_total_tokens) as bigint) as output_total_tokens,
        cast(sum(total_tokens) as bigint) as total_tokens,
        sum(cost_usd) as cost_usd,
        count(*) filter (where not is_priced) as unpriced_inferences,
        count(*) filter (where not usage_complete) as incomplete_inferences,
        bool_or(is_cost_lower_bound) as is_lower_bound,
    from located
    group by day, agent, model
)

select * from final
order by day, agent, model
