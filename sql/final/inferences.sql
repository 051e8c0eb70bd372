-- inferences: one row per inference_id in the whole output: the selected observation.
-- reads: inference_observations, request_contexts
with observations as (
    select * from inference_observations
),

request_params as (
    select inference_id, arg_max(params, position) as params
    from request_contexts
    where inference_id is not null and params is not null
    group by inference_id
),

final as (
    select
        o.* exclude (is_selected, line_count),
        -- a Codex token_count's last_token_usage is the completed response's usage, a token_usage_record's
        -- usage the response's as the API reported it, incomplete responses' included (no stop reason is written)
        o.stop_reason is not null or o.usage_source in ('token_count', 'token_usage_record') as usage_complete,
        rp.params,
    from observations as o
    left join request_params as rp using (inference_id)
    where o.is_selected
)

select
    inference_id, session_key, record_id, model, stop_reason,
    input_uncached_tokens, input_total_tokens, input_includes_cache, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_total_tokens,
    output_reasoning_tokens, service_tier, attributed_mcp_server, attributed_mcp_tool, params, usage_complete, usage_source, usage_position,
    usage_source_file, usage_source_line, observation_count,
from final
order by session_key, inference_id
