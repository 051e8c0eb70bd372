-- memory_changes: one row per write to a memory store: a file tool call (call_id) whose target is a
-- memory file, or one written path of a memory_saved event.
-- Registry entry, Memory: a write to the project memory directory (~/.claude/projects/<encoded
-- working directory>/memory/, flagged memdirStamped on the result) or a memory_saved {writtenPaths}
-- event → memory_change {store: auto_memory, scope: project, op: add | update, target.path,
-- cause.callId}, with status: applied when the write's result succeeded. Writes under
-- ~/.claude/agent-memory/<agentType>/ → store: agent_memory, scope: agent.
-- A memory_saved path is an update when the stream shows an earlier applied write of that path (a
-- file tool call or an earlier memory_saved), else an add: the first write this transcript shows
-- (a file written in an earlier session reads as add; the transcript cannot tell).
-- reads: batch_parts, batch_tool_calls, classified, records_full
with records as (
    select record_id, position, timestamp, seq from records_full
),

file_calls as (
    select * from batch_tool_calls
    where tool_name in ('Write', 'Edit', 'MultiEdit', 'NotebookEdit')
),

-- the tool_use block of each file call (the first, should a line repeat it)
tool_uses as (
    select * from batch_parts
    where part_type = 'tool_use' and record_id in (select call_record_id from file_calls)
    qualify row_number() over (partition by record_id, call_id order by part_index) = 1
),

writes as (
    select
        c.call_id,
        c.session_key,
        c.tool_name,
        c.status as call_status,
        coalesce(c.result_record_id, c.call_record_id) as record_id,
        c.result_native,
        coalesce(
            c.input ->> '$.file_path', c.input ->> '$.notebook_path', c.result_native ->> '$.filePath'
        ) as target_path,
        -- the result is re-serialized JSON: only a result naming the flag is parsed for it
        case when contains(c.result_native, '"memdirStamped"') then
            case c.result_native ->> '$.memdirStamped'
                when 'true' then true
                when 'false' then false
            end
        end as is_memdir_stamped,
        u.source_ord,
        u.native_path,
    from file_calls as c
    join tool_uses as u on u.record_id = c.call_record_id and u.call_id = c.call_id
),

classified_writes as (
    select
        *,
        regexp_extract(target_path, '(^|[/\\])\.claude[/\\]agent-memory(-local)?[/\\]([^/\\]+)[/\\]', 3) as agent_dir,
        regexp_matches(target_path, '(^|[/\\])\.claude[/\\]projects[/\\][^/\\]+[/\\]memory[/\\]') as in_memdir,
    from writes
),

tool_changes as (
    select
        w.record_id,
        w.session_key,
        case when w.agent_dir <> '' then 'agent_memory' else 'auto_memory' end as store,
        case when w.agent_dir <> '' then 'agent' else 'project' end as scope,
        case
            when w.result_native ->> '$.type' = 'create' then 'add'
            when w.result_native ->> '$.type' = 'update' then 'update'
            when w.tool_name in ('Edit', 'MultiEdit', 'NotebookEdit') then 'update'
        end as op,
        w.target_path,
        nullif(w.agent_dir, '') as agent_type,
        w.call_id as cause_call_id,
        w.tool_name,
        'tool_write' as evidence,
        w.is_memdir_stamped,
        case
            when w.call_status = 'error' or json_type(w.result_native) = 'VARCHAR' then 'failed'
            when w.call_status = 'completed' then 'applied'
            else 'unknown'
        end as status,
        w.result_native,
        -- the tool_use block's JSON, read from the line it was first seen in (for these writes only)
        json_extract(l.json, w.native_path)::varchar as native,
    from classified_writes as w
    join classified as l on l.ord = w.source_ord
    where w.agent_dir <> '' or w.in_memdir or coalesce(w.is_memdir_stamped, false)
),

saved as (
    select
        record_id,
        session_key,
        native,
        unnest(json_extract_string(native, '$.writtenPaths[*]')) as target_path,
    from records_full
    where native_type = 'system'
        and native_subtype = 'memory_saved'
        and json_type(native, '$.writtenPaths') = 'ARRAY'
),

saved_changes as (
    select
        record_id,
        session_key,
        case when agent_dir <> '' then 'agent_memory' else 'auto_memory' end as store,
        case when agent_dir <> '' then 'agent' else 'project' end as scope,
        null as op,
        target_path,
        nullif(agent_dir, '') as agent_type,
        null as cause_call_id,
        null as tool_name,
        'memory_saved' as evidence,
        null::boolean as is_memdir_stamped,
        'applied' as status,
        null as result_native,
        native,
    from (
        select
            *,
            regexp_extract(target_path, '(^|[/\\])\.claude[/\\]agent-memory(-local)?[/\\]([^/\\]+)[/\\]', 3) as agent_dir,
        from saved
    )
),

unioned as (
    select * from tool_changes
    union all
    select * from saved_changes
),

final as (
    select
        u.record_id,
        u.session_key,
        u.store,
        u.scope,
        case
            when u.evidence <> 'memory_saved' then u.op
            when count(*) filter (where u.status = 'applied') over (
                partition by u.session_key, u.target_path
                order by r.seq rows between unbounded preceding and 1 preceding
            ) > 0 then 'update'
            else 'add'
        end as op,
        u.target_path,
        u.agent_type,
        u.cause_call_id,
        u.tool_name,
        u.evidence,
        u.is_memdir_stamped,
        u.status,
        r.position,
        r.timestamp as recorded_at,
        u.result_native::varchar as result_native,
        u.native::varchar as native,
        r.seq,
    from unioned as u
    join records as r using (record_id)
)

select * exclude (seq) from final
order by session_key, seq, cause_call_id, target_path
