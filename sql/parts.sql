-- parts: one row per distinct content block of a record, in first-seen order (ASR-511).
-- A string message.content, and a system line's string content, are one text block.
with live as (
    select * from observation_keys where is_live
),

array_blocks as (
    select
        record_id,
        session_key,
        ord,
        line,
        unnest(json_extract(content, '$[*]')) as block,
        unnest(range(json_array_length(content)::bigint)) as block_index,
    from live
    where content_type = 'ARRAY'
),

string_blocks as (
    select
        record_id,
        session_key,
        ord,
        line,
        json_object('type', 'text', 'text', json_extract_string(coalesce(content, top_content), '$')) as block,
        0 as block_index,
    from live
    where content_type = 'VARCHAR'
        or (content is null and native_type = 'system' and json_type(top_content) = 'VARCHAR')
),

blocks as (
    select * from array_blocks
    union all
    select * from string_blocks
),

distinct_blocks as (
    select * from blocks
    qualify row_number() over (partition by record_id, hash(block::varchar) order by ord, block_index) = 1
),

decoded as (
    select
        *,
        json_transform(block, '{
            "type": "VARCHAR", "text": "VARCHAR", "thinking": "VARCHAR", "id": "VARCHAR",
            "name": "VARCHAR", "input": "JSON", "tool_use_id": "VARCHAR", "content": "JSON",
            "is_error": "BOOLEAN", "source": {"media_type": "VARCHAR"}
        }') as b,
    from distinct_blocks
),

final as (
    select
        record_id,
        session_key,
        row_number() over (partition by record_id order by ord, block_index) - 1 as part_index,
        coalesce(b.type, 'unknown') as part_type,
        case
            when b.type = 'text' then b.text
            when b.type = 'thinking' then b.thinking
            when b.type = 'tool_result' and json_type(b.content) = 'VARCHAR' then json_extract_string(b.content, '$')
            when b.type = 'tool_result' and json_type(b.content) = 'ARRAY'
                then array_to_string(json_extract_string(b.content, '$[*].text'), '\n')
        end as text,
        coalesce(b.id, b.tool_use_id) as call_id,
        b.name as tool_name,
        b.input as tool_input,
        b.is_error,
        b.source.media_type as media_type,
        line as source_line,
        block::varchar as native,
    from decoded
)

select * from final
order by session_key, record_id, part_index
