-- codex_usage_records: one row per token_usage_record line of a Codex rollout (reference
-- codex-format.md §14.4): the usage of one model response, completed or ended incomplete with usage,
-- under the Responses API's response_id. Read by formats/codex/usage.py.
-- reads: codex_fact_lines
-- Only `usage` is read: turn_token_usage and thread_token_usage are running sums of the same
-- responses. A compacted line's latest_token_usage_record is an embedded copy of a record already
-- written, and is never read (it is no line of this kind). Counts follow json_bigint, as every count
-- read from a line's JSON; cache writes are cache_write_input_tokens, or cache_creation_input_tokens
-- (the name some builds write, §9.1).
with lines as (
    select file_idx, line, text
    from codex_fact_lines
    where line_type = 'token_usage_record'
),

decoded as (
    select
        file_idx,
        line,
        json_extract(text, '$.payload') as p,
    from lines
),

final as (
    select
        file_idx,
        line,
        p ->> '$.response_id' as response_id,
        p ->> '$.thread_id' as record_thread_id,
        p ->> '$.turn_id' as record_turn_id,
        json_bigint(p -> '$.usage.input_tokens') as record_input,
        json_bigint(p -> '$.usage.cached_input_tokens') as record_cached,
        json_bigint(p -> '$.usage.output_tokens') as record_output,
        json_bigint(p -> '$.usage.reasoning_output_tokens') as record_reasoning,
        json_bigint(coalesce(p -> '$.usage.cache_write_input_tokens', p -> '$.usage.cache_creation_input_tokens'))
            as record_cache_write,
    from decoded
)

select * from final
order by file_idx, line
