-- cache_hit_ratio: one row per (UTC day, model): how much of the input was read from the cache.
-- reads: inference_costs
-- cache_hit_ratio = cache reads / total input (uncached + cache reads + cache writes), over the
-- inferences that report all three (input_total_tokens not null); the others are not counted.
with costs as (
    select * from inference_costs
    where input_total_tokens is not null
),

final as (
    select
        day,
        model,
        count(*) as inferences,
        sum(input_total_tokens) as input_total_tokens,
        sum(cache_read_tokens) as cache_read_tokens,
        sum(cache_write_tokens) as cache_write_tokens,
        sum(input_uncached_tokens) as input_uncached_tokens,
        sum(cache_read_tokens) / nullif(sum(input_total_tokens), 0) as cache_hit_ratio,
        sum(cache_write_tokens) / nullif(sum(input_total_tokens), 0) as cache_write_ratio,
    from costs
    group by day, model
)

select * from final
order by day, model
