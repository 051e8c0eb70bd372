-- background_tasks: one row per background task (task_id) per stream; a background launch
-- without result has no task_id yet and is keyed by its call.
-- Registry "Background work": a background Bash command (backgroundTaskId) → terminal with kind:
-- shell; Monitor → terminal with kind: monitor; TaskStop → status: stopped. A background agent
-- (Agent with run_in_background) → subagent with async: true, revised from task_status
-- attachments (taskType: local_agent) and task notifications; local_bash task status revises the
-- terminal. waiting_for_task progress, BashOutput, KillShell and TaskOutput results are status
-- evidence too. The latest evidence in file order sets the status.
-- Rows first, then JSON: plain substring tests (supersets of the JSON conditions below) pick the
-- few calls and records that can be evidence, and only those are parsed.
-- reads: batch_parts, batch_tool_calls, records_full
with waiting_progress as (
    select session_key, record_id, parent_tool_use_id, native,
    from records_full
    where native_type = 'progress' and native_subtype = 'waiting_for_task'
),

-- tool results whose text may say that a shell command went to the background
background_results as (
    select record_id, call_id,
    from batch_parts
    where part_type = 'tool_result' and contains(text, 'background')
),

-- calls that can be evidence: the task tools by name; any call whose result names a
-- backgroundTaskId or an async launch (status async_launched, isAsync); a Bash or PowerShell
-- call whose result text mentions the background, or that asked for the background and has no
-- result yet; a call that waiting_for_task progress points at
candidate_calls as (
    select *
    from batch_tool_calls as c
    where tool_name in ('Monitor', 'Agent', 'Task', 'TaskStop', 'KillShell', 'KillBash', 'BashOutput', 'TaskOutput')
        or contains(result_native, 'backgroundTaskId')
        or contains(result_native, 'async_launched')
        or contains(result_native, 'isAsync')
        or (
            tool_name in ('Bash', 'PowerShell')
            and (
                (result_record_id, call_id) in (select (record_id, call_id) from background_results)
                or (result_record_id is null and contains(input, 'run_in_background'))
            )
        )
        or (session_key, call_id) in (select (session_key, parent_tool_use_id) from waiting_progress)
),

calls as (
    select
        c.*,
        r.text as result_text,
        c.result_native ->> '$.backgroundTaskId' as background_task_id,
        coalesce(
            c.result_native ->> '$.status' = 'async_launched',
            try_cast(c.result_native ->> '$.isAsync' as boolean),
            false
        ) as is_async_launch,
        try_cast(c.input ->> '$.run_in_background' as boolean) as run_in_background,
        coalesce(json_type(c.result_native) = 'VARCHAR', false) or coalesce(c.is_error, false) as is_failed_result,
    from candidate_calls as c
    left join batch_parts as r
        on r.record_id = c.result_record_id and r.call_id = c.call_id and r.part_type = 'tool_result'
    qualify row_number() over (partition by c.session_key, c.call_id order by r.part_index) = 1
),

-- launches: the call that started a task, with the task ID its result names
launch_ids as (
    select
        *,
        case
            when tool_name = 'Monitor' then coalesce(
                result_native ->> '$.taskId',
                nullif(regexp_extract(result_text, 'Monitor started \(task ([A-Za-z0-9_-]+)', 1), '')
            )
            when background_task_id is not null then background_task_id
            when is_async_launch then coalesce(result_native ->> '$.agentId', result_native ->> '$.taskId')
            when tool_name in ('Bash', 'PowerShell') and not is_failed_result then nullif(regexp_extract(
                result_text,
                '(?s)^(?:Command running in background with ID:|.*moved to the background \(ID:)\s*([A-Za-z0-9_-]+)',
                1
            ), '')
        end as task_id,
    from calls
),

launches as (
    select
        session_key,
        task_id,
        call_id,
        tool_name,
        coalesce(result_record_id, call_record_id) as record_id,
        0 as sub,
        case when result_record_id is null then 'launch_call' else 'launch_result' end as source,
        case when task_id is null then 'pending' else 'running' end as status,
        case
            when tool_name = 'Monitor' then 'monitor'
            when tool_name in ('Bash', 'PowerShell') then 'shell'
            when result_native ->> '$.agentId' is not null then 'subagent'
            when result_native ->> '$.taskType' = 'local_workflow' then 'workflow'
            when tool_name in ('Agent', 'Task') then 'subagent'
            else result_native ->> '$.taskType'
        end as task_kind,
        case when task_id is not null then true end as is_async,
        case when tool_name <> 'Monitor' then coalesce(run_in_background, false) end as is_requested_background,
        input ->> '$.command' as command,
        input ->> '$.description' as description,
        result_native ->> '$.taskType' as native_task_type,
        cast(null as bigint) as exit_code,
        coalesce(
            result_native ->> '$.outputFile',
            nullif(rtrim(regexp_extract(result_text, 'Output is being written to:? (\S+)', 1), '.'), '')
        ) as output_file,
        cast(null as varchar) as summary,
        result_native::json as latest_native,
        result_native::json as launch_native,
        result_at as started_at,
    from launch_ids
    where task_id is not null
        or (
            result_record_id is null
            and (tool_name = 'Monitor' or (run_in_background and tool_name in ('Bash', 'PowerShell', 'Agent', 'Task')))
        )
),

-- task_status attachments (taskType local_agent, local_bash, …)
status_attachments as (
    select
        session_key,
        native ->> '$.attachment.taskId' as task_id,
        cast(null as varchar) as call_id,
        record_id,
        0 as sub,
        'task_status' as source,
        native ->> '$.attachment.status' as status,
        native ->> '$.attachment.taskType' as native_task_type,
        native ->> '$.attachment.description' as description,
        cast(null as varchar) as command,
        cast(null as bigint) as exit_code,
        native ->> '$.attachment.outputFilePath' as output_file,
        native ->> '$.attachment.deltaSummary' as summary,
        native -> '$.attachment' as latest_native,
    from records_full
    where native_type = 'attachment' and native_subtype = 'task_status'
),

-- task notifications: a user line (origin task-notification), a queued command attachment or a
-- queue-operation carrying one or more <task-notification> blocks
carrier_json as (
    select
        record_id,
        session_key,
        native_type,
        case native_type
            when 'queue-operation' then native -> '$.content'
            when 'attachment' then coalesce(native -> '$.attachment.prompt', native -> '$.attachment.content')
            else native -> '$.message.content'
        end as body,
        native ->> '$.origin.kind' = 'task-notification'
            or native ->> '$.attachment.commandMode' = 'task-notification' as is_marked,
    from records_full
    where (
            (native_type = 'queue-operation')
            or (native_type = 'attachment')
            or (native_type = 'user' and kind not in ('tool_result', 'compaction'))
        )
        -- a plain substring test first, so only candidate lines are parsed
        and contains(native, 'task-notification')
),

carriers as (
    select
        record_id,
        session_key,
        case json_type(body)
            when 'VARCHAR' then body ->> '$'
            when 'ARRAY' then array_to_string(json_extract_string(body, '$[*].text'), chr(10))
        end as body_text,
        coalesce(is_marked, false) as is_marked,
    from carrier_json
),

notification_chunks as (
    select
        record_id,
        session_key,
        string_split(body_text, '<task-notification>') as chunks,
    from carriers
    where body_text like '%<task-notification>%'
        and (is_marked or starts_with(ltrim(body_text), '<task-notification>'))
),

notification_index as (
    select
        record_id,
        session_key,
        chunks,
        unnest(range(2, len(chunks) + 1)) as sub,
    from notification_chunks
),

notification_blocks as (
    select
        record_id,
        session_key,
        sub,
        split_part(chunks[sub], '</task-notification>', 1) as block,
    from notification_index
),

notifications as (
    select
        session_key,
        nullif(regexp_extract(block, '<task-id>\s*(.*?)\s*</task-id>', 1), '') as task_id,
        nullif(regexp_extract(block, '<tool-use-id>\s*(.*?)\s*</tool-use-id>', 1), '') as call_id,
        record_id,
        sub,
        'task_notification' as source,
        nullif(regexp_extract(block, '<status>\s*(.*?)\s*</status>', 1), '') as status,
        cast(null as varchar) as native_task_type,
        cast(null as varchar) as description,
        cast(null as varchar) as command,
        cast(null as bigint) as exit_code,
        nullif(regexp_extract(block, '<output-file>\s*(.*?)\s*</output-file>', 1), '') as output_file,
        nullif(regexp_extract(block, '(?s)<summary>\s*(.*?)\s*</summary>', 1), '') as summary,
        to_json('<task-notification>' || block || '</task-notification>') as latest_native,
    from notification_blocks
),

-- TaskStop (status stopped), KillShell and KillBash (status killed): a stop that did not fail
stops as (
    select
        session_key,
        coalesce(
            input ->> '$.task_id', input ->> '$.shell_id',
            result_native ->> '$.task_id', result_native ->> '$.shell_id'
        ) as task_id,
        cast(null as varchar) as call_id,
        coalesce(result_record_id, call_record_id) as record_id,
        0 as sub,
        case when tool_name = 'TaskStop' then 'task_stop' else 'kill_shell' end as source,
        case when tool_name = 'TaskStop' then 'stopped' else 'killed' end as status,
        result_native ->> '$.task_type' as native_task_type,
        cast(null as varchar) as description,
        result_native ->> '$.command' as command,
        cast(null as bigint) as exit_code,
        cast(null as varchar) as output_file,
        cast(null as varchar) as summary,
        coalesce(result_native::json, input::json) as latest_native,
    from calls
    where tool_name in ('TaskStop', 'KillShell', 'KillBash') and not is_failed_result
),

-- reads of a task's state: BashOutput (1.0.x–2.0.x) and TaskOutput (2.1.x) results
reads as (
    select
        session_key,
        case
            when tool_name = 'BashOutput' then coalesce(result_native ->> '$.shellId', input ->> '$.bash_id')
            else coalesce(result_native ->> '$.task.task_id', input ->> '$.task_id')
        end as task_id,
        cast(null as varchar) as call_id,
        result_record_id as record_id,
        0 as sub,
        case when tool_name = 'BashOutput' then 'bash_output' else 'task_output' end as source,
        coalesce(result_native ->> '$.status', result_native ->> '$.task.status') as status,
        result_native ->> '$.task.task_type' as native_task_type,
        result_native ->> '$.task.description' as description,
        result_native ->> '$.command' as command,
        json_bigint(coalesce(nullif(result_native -> '$.exitCode', 'null'), result_native -> '$.task.exitCode')) as exit_code,
        cast(null as varchar) as output_file,
        cast(null as varchar) as summary,
        result_native::json as latest_native,
    from calls
    where tool_name in ('BashOutput', 'TaskOutput')
        and result_record_id is not null
        and not is_failed_result
        and coalesce(result_native ->> '$.status', result_native ->> '$.task.status') is not null
),

-- waiting_for_task progress: the task a blocking read waits on is still running
waits as (
    select
        p.session_key,
        coalesce(c.input ->> '$.task_id', c.input ->> '$.agentId') as task_id,
        cast(null as varchar) as call_id,
        p.record_id,
        0 as sub,
        'waiting_for_task' as source,
        'running' as status,
        p.native ->> '$.data.taskType' as native_task_type,
        p.native ->> '$.data.taskDescription' as description,
        cast(null as varchar) as command,
        cast(null as bigint) as exit_code,
        cast(null as varchar) as output_file,
        cast(null as varchar) as summary,
        p.native -> '$.data' as latest_native,
    from waiting_progress as p
    join calls as c on c.session_key = p.session_key and c.call_id = p.parent_tool_use_id
),

evidence as (
    select
        session_key, task_id, call_id, record_id, sub, source, status, native_task_type, description,
        command, exit_code, output_file, summary, latest_native,
        tool_name, task_kind, is_async, is_requested_background, launch_native, started_at,
        true as is_launch,
    from launches
    union all by name
    select *, false as is_launch from status_attachments
    union all by name
    select *, false as is_launch from notifications
    union all by name
    select *, false as is_launch from stops
    union all by name
    select *, false as is_launch from reads
    union all by name
    select *, false as is_launch from waits
),

ordered as (
    select
        e.*,
        coalesce(e.task_id, 'call:' || e.call_id) as task_key,
        r.seq * 100000 + e.sub as ord,
        r.timestamp as record_at,
    from evidence as e
    left join records_full as r using (record_id)
    where e.task_id is not null or e.is_launch
),

evidence_records as (
    select session_key, task_key, record_id, min(ord) as first_ord,
    from ordered
    group by all
),

record_lists as (
    select session_key, task_key, list(record_id order by first_ord) as evidence_record_ids,
    from evidence_records
    group by all
),

grouped as (
    select
        session_key,
        task_key,
        any_value(task_id) as task_id,
        arg_min(call_id, ord) filter (where is_launch) as launch_call_id,
        arg_min(call_id, ord) filter (where call_id is not null) as named_call_id,
        arg_min(tool_name, ord) filter (where is_launch) as tool_name,
        arg_min(task_kind, ord) filter (where is_launch and task_kind is not null) as launch_kind,
        arg_min(is_async, ord) filter (where is_launch) as is_async,
        arg_min(is_requested_background, ord) filter (where is_launch) as is_requested_background,
        arg_min(command, ord) filter (where is_launch and command is not null) as launch_command,
        arg_max(command, ord) filter (where command is not null) as latest_command,
        arg_min(description, ord) filter (where is_launch and description is not null) as launch_description,
        arg_max(description, ord) filter (where description is not null) as latest_description,
        arg_max(native_task_type, ord) filter (where native_task_type is not null) as native_task_type,
        arg_max(status, ord) filter (where status is not null) as status,
        arg_max(source, ord) filter (where status is not null) as status_source,
        arg_max(record_id, ord) filter (where status is not null) as status_record_id,
        arg_max(record_at, ord) filter (where status is not null) as status_at,
        arg_min(record_id, ord) filter (where is_launch and task_id is not null) as launch_record_id,
        arg_min(started_at, ord) filter (where is_launch) as started_at,
        arg_max(exit_code, ord) filter (where exit_code is not null) as exit_code,
        arg_max(record_id, ord) filter (where exit_code is not null) as exit_code_record_id,
        arg_max(source, ord) filter (where exit_code is not null) as exit_code_source,
        arg_max(output_file, ord) filter (where output_file is not null) as output_file,
        arg_max(summary, ord) filter (where summary is not null) as summary,
        count(*) as evidence_count,
        arg_min(launch_native, ord) filter (where is_launch) as launch_native,
        arg_max(latest_native, ord) filter (where status is not null) as latest_native,
    from ordered
    group by all
),

final as (
    select
        g.task_id,
        g.session_key,
        coalesce(
            g.launch_kind,
            case g.native_task_type
                when 'local_bash' then 'shell'
                when 'local_agent' then 'subagent'
                when 'local_workflow' then 'workflow'
                else g.native_task_type
            end
        ) as task_kind,
        coalesce(g.launch_call_id, g.named_call_id) as call_id,
        g.tool_name,
        g.is_async,
        g.is_requested_background,
        coalesce(g.launch_command, g.latest_command) as command,
        coalesce(g.launch_description, g.latest_description) as description,
        case
            when coalesce(g.launch_kind, case g.native_task_type when 'local_agent' then 'subagent' end) = 'subagent'
                then g.task_id
        end as agent_id,
        g.native_task_type,
        g.status,
        g.status_source,
        g.status_record_id,
        g.status_at,
        g.launch_record_id,
        g.started_at,
        g.exit_code,
        g.exit_code_record_id,
        g.exit_code_source,
        g.output_file,
        g.summary,
        g.evidence_count,
        l.evidence_record_ids,
        json_object('launch', g.launch_native, 'latest', g.latest_native) as native,
    from grouped as g
    join record_lists as l using (session_key, task_key)
)

select * from final
order by session_key, task_id, call_id
