-- tool_calls: one row per tool call (call_id) in a stream, joined with its first result.
-- Model calls are tool_use blocks; a user's `!` shell command (<bash-input>, answered by a
-- <bash-stdout> line) is a call requested by the user, keyed by the input line's uuid.
-- Approvals are compact decisions on the result (ASR-279): permissionDecision and toolDenialKind.
-- The JSON texts of a model call are not copied here: `input` and `result_native` are null for them
-- and the pipeline gathers the block's input (parts, by call_record_id and call_part_index) and the
-- result's toolUseResult (records, by result_record_id) into them; a user's shell command has its own.
-- reads: batch_parts, records_full
-- result: large
-- the blocks that can be calls or results, with the narrow columns of their record: the JSON
-- texts (the block's, the record's toolUseResult) are not carried through the windows below, and
-- a first block's text only where it is a shell command's input
with parts_ as (
    select
        p.record_id, p.session_key, p.part_index, p.part_type, p.call_id, p.tool_name, p.is_error,
        case when p.part_index = 0 and starts_with(ltrim(p.text), '<bash-input>') then p.text end as shell_input,
        r.record_first_ord, r.position, r.timestamp,
        r.tool_denial_kind, r.permission_decision, r.permission_source, r.permission_reason_type,
        r.uuid,
    from batch_parts as p
    join records_full as r using (record_id)
    where (p.part_type in ('tool_use', 'tool_result') and p.call_id is not null) or p.part_index = 0
),

model_calls as (
    select
        session_key, call_id, tool_name, cast(null as varchar) as tool_input, record_id, position, timestamp,
        record_first_ord, part_index, 'model' as requested_by,
    from parts_
    where part_type = 'tool_use' and call_id is not null
    qualify row_number() over (partition by session_key, call_id order by record_first_ord, part_index) = 1
),

first_results as (
    select
        session_key, call_id, record_id, position, timestamp, is_error,
        tool_denial_kind, permission_decision, permission_source, permission_reason_type,
    from parts_
    where part_type = 'tool_result' and call_id is not null
    qualify row_number() over (partition by session_key, call_id order by record_first_ord, part_index) = 1
),

-- the result's toolUseResult is gathered by the pipeline (result_record_id)
model_results as (
    select
        f.session_key, f.call_id, f.record_id, f.position, f.timestamp, f.is_error,
        cast(null as varchar) as tool_use_result,
        f.tool_denial_kind, f.permission_decision, f.permission_source, f.permission_reason_type,
    from first_results as f
),

shell_inputs as (
    select
        p.session_key,
        p.uuid as call_id,
        'Bash' as tool_name,
        json_object('command', regexp_extract(p.shell_input, '<bash-input>(.*)</bash-input>', 1, 's')) as tool_input,
        p.record_id, p.position, p.timestamp, p.record_first_ord, p.part_index,
        'user' as requested_by,
    from parts_ as p
    where p.shell_input is not null
),

shell_outputs as (
    select
        o.session_key,
        i.call_id,
        o.record_id,
        o.position,
        o.timestamp,
        cast(null as boolean) as is_error,
        json_object(
            'stdout', regexp_extract(p.text, '<bash-stdout>(.*)</bash-stdout>', 1, 's'),
            'stderr', regexp_extract(p.text, '<bash-stderr>(.*)</bash-stderr>', 1, 's')
        ) as tool_use_result,
        o.tool_denial_kind, o.permission_decision, o.permission_source, o.permission_reason_type,
    from records_full as o
    join batch_parts as p on p.record_id = o.record_id and p.part_index = 0
    join shell_inputs as i on i.session_key = o.session_key and o.parent_uuid = i.call_id
    where regexp_matches(ltrim(p.text), '^<bash-std(out|err)>')
    qualify row_number() over (partition by i.session_key, i.call_id order by o.record_first_ord) = 1
),

calls as (
    select * from model_calls
    union all
    select * from shell_inputs
),

results as (
    select * from model_results
    union all
    select * from shell_outputs
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
        c.requested_by,
        case
            when r.call_id is null then 'pending'
            when r.tool_denial_kind = 'interrupted' then 'interrupted'
            when r.tool_denial_kind = 'cancelled' then 'cancelled'
            when r.tool_denial_kind is not null then 'denied'
            when r.permission_decision = 'reject' then 'denied'
            when coalesce(r.is_error, false) then 'error'
            else 'completed'
        end as status,
        r.is_error,
        r.tool_denial_kind as denial_kind,
        case r.permission_decision
            when 'accept' then case when r.permission_source = 'user_permanent' then 'allow_always' else 'allow_once' end
            when 'reject' then 'reject_once'
        end as permission,
        case
            when r.permission_reason_type = 'classifier' then 'classifier'
            when r.permission_source = 'config' then 'policy'
            when r.permission_source in ('user_temporary', 'user_permanent', 'user_reject', 'user_abort') then 'user'
            when r.permission_source = 'hook' then 'hook'
        end as permission_decided_by,
        case when r.permission_decision is not null then json_object(
            'decision', r.permission_decision, 'source', r.permission_source, 'reasonType', r.permission_reason_type
        ) end as permission_native,
        c.record_id as call_record_id,
        r.record_id as result_record_id,
        c.position as call_position,
        r.position as result_position,
        c.timestamp as called_at,
        r.timestamp as result_at,
        c.tool_input as input,
        r.tool_use_result as result_native,
        c.record_first_ord as call_ord,
        c.part_index as call_part_index,
    from calls as c
    left join results as r using (session_key, call_id)
)

-- file order: a response holding several calls lists them in block order
select * exclude (call_ord) from final
order by session_key, call_ord, call_part_index
