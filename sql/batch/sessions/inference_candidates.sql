-- inference_candidates: one row per (stream, inference): the latest observation of each
-- response in one stream. Synthetic API-error lines are not inferences. Usage never comes from
-- toolUseResult.usage, nor from agent_progress copies of a subagent whose transcript is present;
-- a stream rebuilt from those copies says so in usage_source.
-- stream_ord orders a stream's candidates (inference_ranks.sql breaks ties by it after
-- session_key): the record's seq, its rank in its stream by first line, which orders them as
-- the batch's line ordinal does but does not depend on the batch the stream is converted in,
-- so a session group's rows are the same in any batch (a re-run's deltas keep them).
-- reads: records_full
-- order: session_key, stream_ord
with responses as (
    select * from records_full where inference_id is not null
),

final as (
    select
        inference_id,
        session_key,
        record_id,
        model,
        stop_reason,
        input_tokens as input_uncached_tokens,
        input_tokens + cache_read_input_tokens + cache_creation_input_tokens as input_total_tokens,
        case when has_usage then true end as input_includes_cache,
        cache_read_input_tokens as cache_read_tokens,
        cache_creation_input_tokens as cache_write_tokens,
        cache_creation_5m as cache_write_5m_tokens,
        cache_creation_1h as cache_write_1h_tokens,
        output_tokens as output_total_tokens,
        cast(null as bigint) as output_reasoning_tokens,
        service_tier,
        attribution_mcp_server as attributed_mcp_server,
        attribution_mcp_tool as attributed_mcp_tool,
        record_source as usage_source,
        usage_position,
        usage_source_file,
        usage_source_line,
        line_count,
        seq as stream_ord,
    from responses
)

select * from final
