-- tool_calls: one row per tool call (call_id) in a stream, joined with its first result.
with parts_ as (
    select p.*, r.record_first_ord, r.position, r.timestamp, r.tool_use_result
    from batch_parts as p
    join records_full as r using (record_id)
),

calls as (
    select * from parts_ where part_type = 'tool_use' and call_id is not null
    qualify row_number() over (partition by session_key, call_id order by record_first_ord, part_index) = 1
),

results as (
    select * from parts_ where part_type = 'tool_result' and call_id is not null
    qualify row_number() over (partition by session_key, call_id order by record_first_ord, part_index) = 1
),

final as (
    select
        c.call_id,
        c.session_key,
        c.tool_name,
        case
            when c.tool_name in ('Bash', 'PowerShell') then 'execute'
            when c.tool_name in ('Edit', 'Write', 'NotebookEdit') then 'edit'
            when c.tool_name = 'Read' then 'read'
            when c.tool_name in ('Glob', 'Grep', 'ToolSearch') then 'search'
            when c.tool_name in ('WebFetch', 'WebSearch') then 'fetch'
            else 'other'
        end as tool_kind,
        case when c.tool_name like 'mcp\_\_%\_\_%' escape '\'
            then split_part(c.tool_name, '__', 2) end as mcp_server,
        case when c.tool_name like 'mcp\_\_%' escape '\' then 'mcp' end as provider_kind,
        'model' as requested_by,
        case
            when r.call_id is null then 'pending'
            when coalesce(r.is_error, false) then 'error'
            else 'completed'
        end as status,
        r.is_error,
        c.record_id as call_record_id,
        r.record_id as result_record_id,
        c.position as call_position,
        r.position as result_position,
        c.timestamp as called_at,
        r.timestamp as result_at,
        c.tool_input as input,
        r.tool_use_result as result_native,
    from calls as c
    left join results as r using (session_key, call_id)
)

select * from final
order by session_key, call_position
