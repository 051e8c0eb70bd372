-- cache_hit_ratio: one row per (local day, agent, model): how much of the input was read from the
-- cache.
-- reads: inference_costs
-- Local days: as in usage_by_day (the time zone in the variable asr_timezone, else UTC).
-- cache_hit_ratio = cache reads / total input (uncached + cache reads + cache writes), over the
-- inferences that report their total input (input_total_tokens not null); the others are not
-- counted. Claude Code reports all three parts; Codex reports its input count (cache reads
-- included) and cache writes only when it writes them: for its models cache_write_tokens and
-- cache_write_ratio are then null.
with costs as (
    select
        * exclude (day),
        asr_local_day(responded_at) as day,
    from inference_costs
    where input_total_tokens is not null
),

final as (
    select
        day,
        agent,
        model,
        count(*) as inferences,
        cast(sum(input_total_tokens) as bigint) as input_total_tokens,
        cast(sum(cache_read_tokens) as bigint) as cache_read_tokens,
        cast(sum(cache_write_tokens) as bigint) as cache_write_tokens,
        cast(sum(input_uncached_tokens) as bigint) as input_uncached_tokens,
        cast(sum(cache_read_tokens) as bigint) / nullif(cast(sum(input_total_tokens) as bigint), 0) as cache_hit_ratio,
        cast(sum(cache_write_tokens) as bigint) / nullif(cast(sum(input_total_tokens) as bigint), 0) as cache_write_ratio,
    from costs
    group by day, agent, model
)

select * from final
order by day, agent, model
