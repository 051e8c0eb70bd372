-- instructions: one row per instruction file loaded (an entry of an instructions attachment's
-- files, or a nested_memory attachment) and per non-empty deferred_tools_delta attachment.
-- Registry entry, Memory: instruction files in the instructions attachment map by type: User → user,
-- Project → project, Local → local, Managed → managed, AutoMem → memory. Configuration:
-- deferred_tools_delta → instructions with kind: tool_definitions and removed.
-- reads: records_full
with attachments as (
    select
        record_id,
        session_key,
        seq,
        position,
        timestamp,
        native_subtype,
        native -> '$.attachment' as a,
    from records_full
    where native_type = 'attachment'
        and native_subtype in ('instructions', 'nested_memory', 'deferred_tools_delta')
),

listed_files as (
    select
        record_id,
        session_key,
        seq,
        position,
        timestamp,
        native_subtype,
        unnest(json_extract(a, '$.files[*]')) as entry,
        unnest(range(json_array_length(a, '$.files')::bigint)) as file_index,
    from attachments
    where native_subtype = 'instructions' and json_type(a, '$.files') = 'ARRAY'
),

instruction_files as (
    select
        record_id,
        session_key,
        seq,
        position,
        timestamp,
        native_subtype,
        file_index,
        entry ->> '$.type' as file_type,
        entry ->> '$.path' as path,
        null as display_path,
        case when json_type(entry, '$.content') = 'VARCHAR' then entry ->> '$.content' end as content,
        entry as native,
    from listed_files
),

-- nested_memory: {path, displayPath, content: {path, type, content}} (content may also be the text).
nested_files as (
    select
        record_id,
        session_key,
        seq,
        position,
        timestamp,
        native_subtype,
        null::bigint as file_index,
        a ->> '$.content.type' as file_type,
        coalesce(a ->> '$.path', a ->> '$.content.path') as path,
        a ->> '$.displayPath' as display_path,
        case
            when json_type(a, '$.content') = 'VARCHAR' then a ->> '$.content'
            when json_type(a, '$.content.content') = 'VARCHAR' then a ->> '$.content.content'
        end as content,
        a as native,
    from attachments
    where native_subtype = 'nested_memory'
),

files as (
    select * from instruction_files
    union all
    select * from nested_files
),

file_rows as (
    select
        record_id,
        session_key,
        'instruction_file' as instruction_kind,
        native_subtype as attachment_type,
        file_index,
        case file_type
            when 'User' then 'user'
            when 'Project' then 'project'
            when 'Local' then 'local'
            when 'Managed' then 'managed'
            when 'AutoMem' then 'memory'
        end as scope,
        file_type,
        path,
        display_path,
        content,
        null::varchar[] as added,
        null::varchar[] as removed,
        null::varchar[] as readded,
        position,
        timestamp,
        native,
        seq,
    from files
),

deltas as (
    select
        *,
        case when json_type(a, '$.addedNames') = 'ARRAY' then json_extract_string(a, '$.addedNames[*]') end as added,
        case when json_type(a, '$.removedNames') = 'ARRAY' then json_extract_string(a, '$.removedNames[*]') end as removed,
        case when json_type(a, '$.readdedNames') = 'ARRAY' then json_extract_string(a, '$.readdedNames[*]') end as readded,
        case when json_type(a, '$.addedLines') = 'ARRAY' then json_extract_string(a, '$.addedLines[*]') end as added_lines,
    from attachments
    where native_subtype = 'deferred_tools_delta'
),

tool_rows as (
    select
        record_id,
        session_key,
        'tool_definitions' as instruction_kind,
        native_subtype as attachment_type,
        null::bigint as file_index,
        null as scope,
        null as file_type,
        null as path,
        null as display_path,
        case when len(added_lines) > 0 then array_to_string(added_lines, chr(10)) end as content,
        added,
        removed,
        readded,
        position,
        timestamp,
        a as native,
        seq,
    from deltas
    -- a delta that only reports MCP server state changes no tool definition
    where len(coalesce(added, [])) + len(coalesce(removed, [])) + len(coalesce(readded, []))
        + len(coalesce(added_lines, [])) > 0
),

unioned as (
    select * from file_rows
    union all
    select * from tool_rows
),

final as (
    select
        record_id,
        session_key,
        instruction_kind,
        attachment_type,
        file_index,
        scope,
        file_type,
        path,
        display_path,
        content,
        added,
        removed,
        readded,
        position,
        timestamp as recorded_at,
        native::varchar as native,
        seq,
    from unioned
)

select * exclude (seq) from final
order by session_key, seq, file_index
