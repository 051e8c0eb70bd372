-- tool_calls: one row per tool call (call_id) in a stream, joined with its first result.
-- Model calls are tool_use blocks; a user's `!` shell command (<bash-input>, answered by a
-- <bash-stdout> line) is a call requested by the user, keyed by the input line's uuid.
-- Approvals are compact decisions on the result (ASR-279): permissionDecision and toolDenialKind;
-- an error result that records neither, the denial its text marks (sql/macros/denial_marker.sql).
-- The JSON texts of a model call are not copied here: `input` and `result_native` are null for them
-- and the converter joins the block's input (parts, by call_record_id and call_part_index) and the
-- result's toolUseResult (records, by result_record_id) into them (formats/claude_code/converter.py);
-- a user's shell command has its own.
-- reads: batch_parts, call_pairs, records_full
-- result: large
-- The pairing (which call record, which result record) is call_pairs.sql's; the parts and records
-- are read here for the rows' own values alone: the part of each block (the first of the record with
-- that id and type), and part 0 of a shell command's records for its text.
with pairs as (
    select * from call_pairs
),

-- the first tool_use part with the call's id in its call record, and tool_result part (with its
-- is_error, and the denial its text marks when it is an error) in its result record
call_parts as (
    select p.record_id, p.call_id, min(p.part_index) as part_index,
    from batch_parts as p
    where p.part_type = 'tool_use'
        and (p.record_id, p.call_id) in (select (call_record_id, call_id) from pairs where requested_by = 'model')
    group by p.record_id, p.call_id
),

result_parts as (
    select
        p.record_id, p.call_id, min(p.part_index) as part_index, first(p.is_error order by p.part_index) as is_error,
        first(case when p.is_error then denial_marker(p.text) end order by p.part_index) as marked,
    from batch_parts as p
    where p.part_type = 'tool_result'
        and (p.record_id, p.call_id) in (select (result_record_id, call_id) from pairs where not is_shell_result)
    group by p.record_id, p.call_id
),

-- the results whose text marks a denial
result_marks as (
    select record_id, call_id, marked,
    from result_parts
    where marked is not null
),

-- the text of part 0 of a shell command's records (its input, its output)
shell_texts as (
    select p.record_id, p.text,
    from batch_parts as p
    where p.part_index = 0
        and p.record_id in (
            select call_record_id from pairs where requested_by = 'user'
            union all
            select result_record_id from pairs where is_shell_result
        )
),

calls as (
    select
        c.session_key, c.call_id, c.tool_name,
        case when c.requested_by = 'user' then json_object(
            'command', regexp_extract(st.text, '<bash-input>(.*)</bash-input>', 1, 's')
        ) end as tool_input,
        c.call_record_id as record_id, r.position, r.timestamp, r.record_first_ord,
        case when c.requested_by = 'user' then 0 else cp.part_index end as part_index,
        c.requested_by,
        c.result_record_id, c.is_shell_result,
    from pairs as c
    join records_full as r on r.record_id = c.call_record_id
    left join call_parts as cp on cp.record_id = c.call_record_id and cp.call_id = c.call_id and c.requested_by = 'model'
    left join shell_texts as st on st.record_id = c.call_record_id and c.requested_by = 'user'
),

results as (
    select
        c.session_key, c.call_id, c.requested_by, c.record_id as call_record_id, c.result_record_id,
        o.record_id, o.position, o.timestamp,
        case when c.is_shell_result then cast(null as boolean) else rp.is_error end as is_error,
        -- a model call's toolUseResult is gathered by the pipeline (result_record_id)
        case when c.is_shell_result then json_object(
            'stdout', regexp_extract(st.text, '<bash-stdout>(.*)</bash-stdout>', 1, 's'),
            'stderr', regexp_extract(st.text, '<bash-stderr>(.*)</bash-stderr>', 1, 's')
        ) end as tool_use_result,
        o.tool_denial_kind, o.permission_decision, o.permission_source, o.permission_reason_type,
        coalesce(o.tool_denial_kind, m.marked.denial_kind) as denial_kind,
        m.marked,
    from calls as c
    join records_full as o on o.record_id = c.result_record_id
    left join result_parts as rp on rp.record_id = c.result_record_id and rp.call_id = c.call_id and not c.is_shell_result
    -- the text marks the denial of a result that records neither field
    left join result_marks as m on m.record_id = c.result_record_id and m.call_id = c.call_id and not c.is_shell_result
        and o.tool_denial_kind is null and o.permission_decision is null
    left join shell_texts as st on st.record_id = c.result_record_id and c.is_shell_result
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
            when r.denial_kind = 'interrupted' then 'interrupted'
            when r.denial_kind = 'cancelled' then 'cancelled'
            when r.denial_kind is not null then 'denied'
            when r.permission_decision = 'reject' then 'denied'
            when coalesce(r.is_error, false) then 'error'
            else 'completed'
        end as status,
        r.is_error,
        -- Claude Code records no numeric exit code or run time of a command (registry entry, Notes)
        cast(null as bigint) as exit_code,
        cast(null as varchar) as exit_code_source,
        cast(null as bigint) as duration_ms,
        r.denial_kind,
        case r.permission_decision
            when 'accept' then case when r.permission_source = 'user_permanent' then 'allow_always' else 'allow_once' end
            when 'reject' then 'reject_once'
            else r.marked.permission
        end as permission,
        case
            when r.permission_reason_type = 'classifier' then 'classifier'
            when r.permission_source = 'config' then 'policy'
            when r.permission_source in ('user_temporary', 'user_permanent', 'user_reject', 'user_abort') then 'user'
            when r.permission_source = 'hook' then 'hook'
            else r.marked.decided_by
        end as permission_decided_by,
        case when r.permission_decision is not null then json_object(
            'decision', r.permission_decision, 'source', r.permission_source, 'reasonType', r.permission_reason_type
        ) end as permission_native,
        case
            when r.tool_denial_kind is not null or r.permission_decision is not null then 'native_field'
            when r.marked is not null then 'text_marker'
        end as permission_evidence,
        r.marked.reason as denial_reason,
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
    left join results as r
        on r.session_key = c.session_key and r.call_id = c.call_id and r.requested_by = c.requested_by
        and r.call_record_id = c.record_id and r.result_record_id = c.result_record_id
)

-- file order: a response holding several calls lists them in block order
select * exclude (call_ord) from final
order by session_key, call_ord, call_part_index
