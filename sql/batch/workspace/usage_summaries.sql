-- usage_summaries: one row per cost-state record.
-- Registry entry, Notes: cost-state totals map to a usage_summary with scope: session,
-- cumulative: true and includesChildren: null. Each cost-state line is a cumulative snapshot
-- written when the process exits (or the session switches); the latest one of a stream holds the
-- totals (the session's last cost-state seq, session_facts.sql). Token totals are summed over modelUsage; a field no model reports stays null.
-- reads: records_full, session_facts
with costs as (
    select record_id, session_key, seq, native
    from records_full
    where native_type = 'cost-state'
),

models as (
    select
        record_id,
        unnest(map_keys(usage)) as model,
        unnest(map_values(usage)) as model_usage,
        unnest(range(cardinality(usage)::bigint)) as model_index,
    from (
        select record_id, json_transform(native -> '$.modelUsage', '"MAP(VARCHAR, JSON)"') as usage
        from costs
    )
),

model_totals as (
    select
        record_id,
        list(model order by model_index) as models,
        sum(json_bigint(model_usage -> '$.inputTokens')) as input_uncached_tokens,
        sum(json_bigint(model_usage -> '$.outputTokens')) as output_total_tokens,
        sum(json_bigint(model_usage -> '$.cacheReadInputTokens')) as cache_read_tokens,
        sum(json_bigint(model_usage -> '$.cacheCreationInputTokens')) as cache_write_tokens,
        sum(json_bigint(model_usage -> '$.thinkingTokens')) as thinking_tokens,
        sum(json_bigint(model_usage -> '$.webSearchRequests')) as web_search_requests,
    from models
    group by record_id
),

final as (
    select
        c.record_id,
        c.session_key,
        c.seq,
        'session' as scope,
        true as is_cumulative,
        null::boolean as includes_children,
        c.seq = s.last_cost_state_seq as is_latest,
        try_cast(c.native ->> 'totalCostUSD' as double) as cost_usd,
        m.input_uncached_tokens::bigint as input_uncached_tokens,
        m.output_total_tokens::bigint as output_total_tokens,
        m.cache_read_tokens::bigint as cache_read_tokens,
        m.cache_write_tokens::bigint as cache_write_tokens,
        m.thinking_tokens::bigint as thinking_tokens,
        m.web_search_requests::bigint as web_search_requests,
        coalesce(m.models, case when json_type(c.native, '$.modelUsage') = 'OBJECT' then []::varchar[] end) as models,
        try_cast(c.native ->> 'totalDuration' as bigint) as duration_ms,
        try_cast(c.native ->> 'totalAPIDuration' as bigint) as api_duration_ms,
        try_cast(c.native ->> 'totalAPIDurationWithoutRetries' as bigint) as api_duration_without_retries_ms,
        try_cast(c.native ->> 'totalToolDuration' as bigint) as tool_duration_ms,
        try_cast(c.native ->> 'totalLinesAdded' as bigint) as lines_added,
        try_cast(c.native ->> 'totalLinesRemoved' as bigint) as lines_removed,
        case when json_type(c.native, '$.hasUnknownModelCost') = 'BOOLEAN'
            then (c.native -> '$.hasUnknownModelCost')::boolean end as has_unknown_model_cost,
        to_timestamp(try_cast(c.native ->> 'startTime' as double) / 1000) as started_at,
        c.native::json as native,
    from costs as c
    left join model_totals as m using (record_id)
    join session_facts as s using (session_key)
)

select * from final
order by session_key, seq
