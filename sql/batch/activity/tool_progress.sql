-- tool_progress: one row per tool call (parentToolUseID) per stream with progress lines.
-- Registry "Background work" and the progress records: bash_progress and mcp_progress go into the
-- status and output of the call they belong to, waiting_for_task into the status of the task it
-- waits on, query_update and search_results_received onto their web-search call. hook_progress
-- (hooks) and agent_progress (lineage) are read elsewhere. Every line stays a records row.
-- reads: batch_tool_calls, records_full
with records as (
    select * from records_full
),

tool_calls as (
    select * from batch_tool_calls
),

progress as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        r.timestamp,
        r.native_subtype as progress_type,
        r.parent_tool_use_id as call_id,
        r.native,
        json_transform(r.native -> '$.data', '{
            "output": "VARCHAR", "fullOutput": "VARCHAR", "elapsedTimeSeconds": "DOUBLE",
            "totalLines": "BIGINT", "totalBytes": "BIGINT", "timeoutMs": "BIGINT", "taskId": "VARCHAR",
            "serverName": "VARCHAR", "toolName": "VARCHAR", "status": "VARCHAR", "elapsedTimeMs": "DOUBLE",
            "query": "VARCHAR", "resultCount": "BIGINT", "taskDescription": "VARCHAR", "taskType": "VARCHAR"
        }') as d,
    from records as r
    where r.native_type = 'progress'
        and r.native_subtype in (
            'bash_progress', 'mcp_progress', 'query_update', 'search_results_received', 'waiting_for_task'
        )
        and r.parent_tool_use_id is not null
),

type_order as (
    select session_key, call_id, progress_type, min(seq) as first_seq,
    from progress
    group by all
),

types as (
    select session_key, call_id, list(progress_type order by first_seq) as progress_types,
    from type_order
    group by all
),

query_order as (
    select session_key, call_id, d.query as query, min(seq) as first_seq,
    from progress
    where progress_type in ('query_update', 'search_results_received') and d.query is not null
    group by all
),

queries as (
    select session_key, call_id, list(query order by first_seq) as queries,
    from query_order
    group by all
),

summary as (
    select
        session_key,
        call_id,
        count(*) as update_count,
        arg_min(record_id, seq) as first_record_id,
        arg_max(record_id, seq) as last_record_id,
        arg_min(timestamp, seq) as first_at,
        arg_max(timestamp, seq) as last_at,
        arg_max(d.output, seq) filter (where d.output is not null) as last_output,
        arg_max(d.fullOutput, seq) filter (where d.fullOutput is not null) as last_full_output,
        greatest(
            max(round(d.elapsedTimeSeconds * 1000)),
            max(round(d.elapsedTimeMs))
        )::bigint as elapsed_ms,
        arg_max(d.totalLines, seq) filter (where d.totalLines is not null) as total_lines,
        arg_max(d.totalBytes, seq) filter (where d.totalBytes is not null) as total_bytes,
        arg_max(d.timeoutMs, seq) filter (where d.timeoutMs is not null) as timeout_ms,
        arg_max(d.taskId, seq) filter (where d.taskId is not null) as task_id,
        arg_max(d.serverName, seq) filter (where d.serverName is not null) as mcp_server,
        arg_max(d.toolName, seq) filter (where d.toolName is not null) as mcp_tool,
        arg_max(d.status, seq) filter (where progress_type = 'mcp_progress' and d.status is not null) as mcp_status,
        count(*) filter (where progress_type = 'search_results_received') as search_count,
        sum(d.resultCount) filter (where progress_type = 'search_results_received')::bigint as result_count,
        arg_max(d.taskDescription, seq) filter (where d.taskDescription is not null) as waiting_task_description,
        arg_max(d.taskType, seq) filter (where progress_type = 'waiting_for_task' and d.taskType is not null)
            as waiting_task_type,
        bool_or(progress_type = 'waiting_for_task') as has_waiting,
        arg_max(native, seq) as native,
    from progress
    group by all
),

final as (
    select
        s.call_id,
        s.session_key,
        c.tool_name,
        t.progress_types,
        s.update_count,
        s.first_record_id,
        s.last_record_id,
        s.first_at,
        s.last_at,
        s.last_output,
        s.last_full_output,
        s.elapsed_ms,
        s.total_lines,
        s.total_bytes,
        s.timeout_ms,
        s.task_id,
        s.mcp_server,
        s.mcp_tool,
        s.mcp_status,
        q.queries,
        case when s.search_count > 0 then s.search_count end as search_count,
        s.result_count,
        case when s.has_waiting then coalesce(c.input ->> '$.task_id', c.input ->> '$.agentId') end
            as waiting_task_id,
        s.waiting_task_description,
        s.waiting_task_type,
        s.native,
    from summary as s
    join types as t using (session_key, call_id)
    left join queries as q using (session_key, call_id)
    left join tool_calls as c using (session_key, call_id)
)

select * from final
order by session_key, call_id
