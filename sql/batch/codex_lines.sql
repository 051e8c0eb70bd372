-- codex_lines: one row per non-blank line of a Codex rollout file (formats/codex), its envelope and
-- the payload fields the mapping reads (reference codex-format.md §2 to §9).
-- reads: codex_input
-- Envelope (0.32+): {timestamp, type, payload}; legacy (before 0.32): the first line is the session
-- meta itself ({id, timestamp, instructions}) and items are bare ({"type": "message", ...}), with
-- {"record_type": "state"} markers. A line that is not a JSON object is rejected with the reason;
-- any other kind, payload type or key is kept (kind unknown), never rejected.
with lines as (
    select file_idx, line, json_valid(text) as is_json, case when json_valid(text) then text end as json_text
    from codex_input
),

objects as (
    select
        file_idx, line, is_json,
        coalesce(json_type(json_text) = 'OBJECT', false) as is_object,
        json_text,
    from lines
),

envelopes as (
    select
        file_idx, line, is_json, is_object,
        case when is_object then json_text end as text,
    from objects
),

kinds as (
    select
        *,
        case
            when text is null then null
            when json_type(text, '$.payload') = 'OBJECT' and json_type(text, '$.type') = 'VARCHAR'
                then text->>'$.type'
            when line = 1 and json_type(text, '$.type') is null and json_type(text, '$.id') = 'VARCHAR'
                then 'session_meta'
            when json_type(text, '$.record_type') is not null and json_type(text, '$.type') is null
                then 'legacy_state'
            when (text->>'$.type') in ('message', 'reasoning', 'function_call', 'function_call_output',
                'custom_tool_call', 'custom_tool_call_output', 'local_shell_call', 'web_search_call')
                and json_type(text, '$.payload') is null
                then 'response_item'
            else coalesce(text->>'$.type', 'unknown')
        end as line_type,
        json_type(text, '$.payload') = 'OBJECT' as enveloped,
    from envelopes
),

payloads as (
    select
        *,
        case when enveloped then text -> '$.payload' when text is not null then text end as payload,
    from kinds
),

fields as (
    select
        file_idx, line, is_json, is_object, line_type, enveloped,
        try_cast(coalesce(text->>'$.timestamp', case when line_type = 'session_meta' then payload->>'$.timestamp' end)
            as timestamptz) as timestamp,
        payload->>'$.type' as payload_type,
        payload->>'$.role' as role,
        payload->>'$.id' as meta_id,
        payload->>'$.cwd' as cwd,
        payload->>'$.originator' as originator,
        payload->>'$.cli_version' as cli_version,
        payload->>'$.model_provider' as model_provider,
        payload->>'$.git.branch' as git_branch,
        payload->>'$.forked_from_id' as forked_from_id,
        case when line_type = 'turn_context' then payload->>'$.model' end as context_model,
        case when line_type = 'turn_context' or payload->>'$.type' in ('task_started', 'turn_started')
            then payload->>'$.turn_id' end as turn_id,
        payload->>'$.call_id' as call_id,
        payload->>'$.name' as tool_name,
        case
            when payload->>'$.type' = 'function_call' then
                case when json_valid(payload->>'$.arguments') then payload->>'$.arguments'
                    else to_json(payload->>'$.arguments') end
            when payload->>'$.type' = 'custom_tool_call' then to_json(payload->>'$.input')
            when payload->>'$.type' in ('local_shell_call', 'web_search_call') then json(payload -> '$.action')
        end as tool_input,
        case when enveloped then payload->>'$.status' end as native_status,
        case
            when json_type(payload, '$.output') = 'VARCHAR' then payload->>'$.output'
            when json_type(payload, '$.output') = 'ARRAY' then array_to_string(
                list_filter(json_extract_string(payload, '$.output[*].text'), lambda x: x is not null), '\n')
        end as output_text,
        -- the text an event copy repeats: user_message and agent_message `message`, agent_reasoning `text`
        case
            when line_type = 'event_msg' and payload->>'$.type' in ('user_message', 'agent_message') then payload->>'$.message'
            when line_type = 'event_msg' and payload->>'$.type' = 'agent_reasoning' then payload->>'$.text'
        end as event_text,
        case
            when payload->>'$.type' = 'message' then array_to_string(
                list_filter(json_extract_string(payload, '$.content[*].text'), lambda x: x is not null), '\n')
        end as item_text,
        json_extract_string(payload, '$.summary[*].text') as summary_texts,
        coalesce(json_type(payload, '$.encrypted_content') = 'VARCHAR', false) as has_encrypted,
        payload->>'$.message' as compacted_text,
        -- token_count (§9): the five classic fields of the running total and of the last response
        json_type(payload, '$.info') = 'OBJECT' as has_info,
        try_cast(payload->>'$.info.total_token_usage.input_tokens' as bigint) as total_input,
        try_cast(payload->>'$.info.total_token_usage.cached_input_tokens' as bigint) as total_cached,
        try_cast(payload->>'$.info.total_token_usage.output_tokens' as bigint) as total_output,
        try_cast(payload->>'$.info.total_token_usage.reasoning_output_tokens' as bigint) as total_reasoning,
        try_cast(payload->>'$.info.total_token_usage.total_tokens' as bigint) as total_total,
        try_cast(payload->>'$.info.last_token_usage.input_tokens' as bigint) as last_input,
        try_cast(payload->>'$.info.last_token_usage.cached_input_tokens' as bigint) as last_cached,
        try_cast(payload->>'$.info.last_token_usage.output_tokens' as bigint) as last_output,
        try_cast(payload->>'$.info.last_token_usage.reasoning_output_tokens' as bigint) as last_reasoning,
        try_cast(payload->>'$.info.last_token_usage.total_tokens' as bigint) as last_total,
        try_cast(coalesce(payload->>'$.info.last_token_usage.cache_write_input_tokens',
            payload->>'$.info.last_token_usage.cache_creation_input_tokens') as bigint) as last_cache_write,
        case
            when not is_json then 'invalid_json'
            when not is_object then 'not_an_object'
        end as reason,
        case
            when not is_json then 'not valid JSON'
            when not is_object then 'a JSON value that is not an object'
        end as detail,
    from payloads
),

-- §9.6: a response is one distinct (total_token_usage, last_token_usage) pair of the five classic
-- fields each; its ID is derived from the pair, so that a copy in a fork or a subagent file (or a
-- re-emit) is the same inference wherever it is read
keyed as (
    select
        *,
        case when line_type = 'event_msg' and payload_type = 'token_count' and has_info
                and total_input is not null and total_cached is not null and total_output is not null
                and total_reasoning is not null and total_total is not null and last_input is not null
                and last_cached is not null and last_output is not null and last_reasoning is not null
                and last_total is not null
            then concat_ws(',', total_input, total_cached, total_output, total_reasoning, total_total,
                last_input, last_cached, last_output, last_reasoning, last_total)
        end as usage_key,
    from fields
)

select
    *,
    case when usage_key is not null then 'codex:usage:' || left(sha256(usage_key), 32) end as usage_id,
    -- placeholders (§9.3.4, §9.6): last input and output both 0 is not a response
    usage_key is not null and not (last_input = 0 and last_output = 0) as is_response,
from keyed
order by file_idx, line
