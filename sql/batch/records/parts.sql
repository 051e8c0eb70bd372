-- parts: one row per distinct content block of a record, in first-seen order (ASR-511).
-- A string message.content, and a system line's string content, are one text block.
-- An attachment's structured content is one data part with schema
-- com.anthropic.claude-code/attachment/<type>; its rendered text stays in display_content, and
-- capture_state says what is actually held (ASR-238): a tool result persisted to tool-results/
-- is external when the file is in the archive, truncated when it is gone.
-- Every step below is per record (batch_part_records: the records whose parts are made).
-- reads: batch_part_records, batch_tool_result_files, observation_keys
-- result: large
-- order: session_key, record_id, part_index
-- (part_index is numbered per record, so the order tells every row apart)
-- attachment rows first, then their JSON: the extractions below run on these rows only (the
-- whole line's JSON is read for attachments only, not carried with every live observation)
with attachments as materialized (
    select
        record_id, session_key, ord, source_file, line, sub, native_type, native_subtype, json,
        case when record_source = 'agent_progress' then '$.data.message' else '$' end as object_path,
    from observation_keys
    where is_live and native_type = 'attachment' and record_id in (select record_id from batch_part_records)
),

-- the blocks of message.content (or of a system line's string content), in one pass over the live
-- lines: a content array is parsed once, its elements unnested with their indexes; a string is one
-- text block. (Two readers of one CTE of the lines would make DuckDB materialize it, every
-- content's text included.)
content_lists as (
    select
        record_id, session_key, ord, line, native_type, source_file, sub,
        content_type = 'ARRAY' as is_element,
        case when record_source = 'agent_progress' then '$.data.message' else '$' end
            || case when content is null then '.content' else '.message.content' end as block_path,
        case
            when content_type = 'ARRAY' then json_extract(content, '$[*]')
            else [json_object('type', 'text', 'text', json_extract_string(coalesce(content, top_content), '$'))]
        end as elements,
    from observation_keys
    where is_live
        and record_id in (select record_id from batch_part_records)
        and (content_type in ('ARRAY', 'VARCHAR')
            or (content is null and native_type = 'system' and json_type(top_content) = 'VARCHAR'))
),

content_blocks as (
    select
        record_id,
        session_key,
        ord,
        line,
        native_type,
        unnest(elements) as block,
        unnest(range(len(elements)::bigint)) as block_index,
        false as is_attachment_data,
        source_file, sub, block_path, is_element,
    from content_lists
),

-- hook_additional_context is a message authored by a hook: its strings are its text
hook_context_blocks as (
    select
        record_id,
        session_key,
        ord,
        line,
        native_type,
        json_object('type', 'text', 'text', unnest(json_extract_string(json, '$.attachment.content[*]'))) as block,
        unnest(range(json_array_length(json->'$.attachment.content')::bigint)) as block_index,
        false as is_attachment_data,
        source_file, sub, object_path || '.attachment.content' as block_path, true as is_element,
    from attachments
    where native_subtype = 'hook_additional_context' and json_type(json->'$.attachment.content') = 'ARRAY'
),

attachment_blocks as (
    select
        record_id,
        session_key,
        ord,
        line,
        native_type,
        json->'$.attachment' as block,
        0 as block_index,
        true as is_attachment_data,
        source_file, sub, object_path || '.attachment' as block_path, false as is_element,
    from attachments
    where json_type(json->'$.attachment') = 'OBJECT'
),

blocks as (
    select * from content_blocks
    union all
    select * from hook_context_blocks
    union all
    select * from attachment_blocks
),

-- which blocks are distinct, and their part_index, decided on narrow keys: windows over the
-- blocks themselves would carry every block's text through their sorts.
-- (ord, is_attachment_data, block_index) names one block of one observation.
block_keys as (
    select record_id, ord, is_attachment_data, block_index, hash(block::varchar) as block_hash,
    from blocks
),

first_seen as (
    select record_id, ord, is_attachment_data, block_index,
    from block_keys
    qualify row_number() over (
        partition by record_id, is_attachment_data, block_hash order by ord, block_index
    ) = 1
),

rendered as (
    select record_id, any_value(json->'$.rendered') as display_content
    from attachments
    where (json->'$.rendered') is not null
    group by record_id
),

-- the part indexes, with the attachment's rendered text joined on these narrow keys. Materialized,
-- so that the join stays here: moved above the blocks' join, DuckDB built its hash table on the
-- blocks (every block's text)
numbered as materialized (
    select n.ord, n.is_attachment_data, n.block_index, n.part_index, r.display_content,
    from (
        select
            record_id,
            ord,
            is_attachment_data,
            block_index,
            -- an attachment's data part comes after the blocks of its text
            row_number() over (partition by record_id order by is_attachment_data, ord, block_index) - 1 as part_index,
        from first_seen
    ) as n
    left join rendered as r using (record_id)
),

distinct_blocks as (
    select b.*, n.part_index, n.display_content,
    from blocks as b
    join numbered as n using (ord, is_attachment_data, block_index)
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

tool_result_files as (
    select name from batch_tool_result_files
),

shaped as (
    select
        d.record_id,
        d.session_key,
        d.part_index,
        case when d.is_attachment_data then 'data' else coalesce(b.type, 'unknown') end as part_type,
        case when d.is_attachment_data then 'com.anthropic.claude-code/attachment/' || b.type end as schema,
        case
            when b.type = 'text' then b.text
            when b.type = 'thinking' then b.thinking
            when b.type = 'tool_result' and json_type(b.content) = 'VARCHAR' then json_extract_string(b.content, '$')
            when b.type = 'tool_result' and json_type(b.content) = 'ARRAY'
                then array_to_string(json_extract_string(b.content, '$[*].text'), chr(10))
        end as text,
        coalesce(b.id, b.tool_use_id) as call_id,
        b.name as tool_name,
        b.input as tool_input,
        b.is_error,
        b.source.media_type as media_type,
        -- a CASE, not an AND: in a select list DuckDB computes both operands of AND (decisions/012)
        case when d.is_attachment_data
            then len(json_keys(d.block)) = case when (d.block->'$.type') is not null then 1 else 0 end
            else false end as is_empty_data,
        d.display_content,
        d.source_file,
        d.line as source_line,
        d.sub as source_sub,
        -- an array's block is its element; a string content, or an attachment, is the value itself
        d.block_path || case when d.is_element then '[' || d.block_index || ']' else '' end as native_path,
        d.ord as source_ord,
    from decoded as d
),

final as (
    select
        * exclude (is_empty_data, persisted_file, display_content, source_file, source_line, source_sub, native_path, source_ord),
        case
            when is_empty_data then 'empty'
            when persisted_file is null then 'complete'
            when persisted_file in (select name from tool_result_files) then 'external'
            else 'truncated'
        end as capture_state,
        persisted_file,
        display_content,
        source_file,
        source_line,
        source_sub,
        native_path,
        -- the observation the block was first seen in, by which a fact table of the batch reads the
        -- block's JSON (the line's, at native_path); not written
        source_ord,
    from (
        select
            *,
            -- a large output replaced by a pointer: "<persisted-output>Tool result saved to: .../tool-results/<file>"
            case when part_type = 'tool_result' and regexp_matches(text, '^\s*<persisted-output>')
                then nullif(regexp_extract(text, 'tool-results/([A-Za-z0-9_.-]+)', 1), '') end as persisted_file,
        from shaped
    )
)

select * from final
