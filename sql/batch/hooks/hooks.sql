-- hooks: one row per hook report. Registry entry, Hooks: hook_success, hook_non_blocking_error,
-- hook_blocking_error, hook_cancelled, hook_error_during_execution and async_hook_response
-- attachments -> hook (stdout, stderr, exitCode, command, durationMs; timedOut from
-- hook_cancelled.timedOut; status blocked for a blocking error); stop_hook_summary -> one hook
-- per hookInfos entry with event stop. Older forms: progress lines of data.type hook_progress
-- (2.1.17-2.1.42, a hook that started) and subtype-less system lines carrying hook text
-- (1.0.43-1.0.56: "Running <name>...", "<name> [<command>] completed successfully: <stdout>").
-- hook_additional_context is a message (author hook), not a row here.
-- reads: call_pairs, records_full
with hook_records as (
    select * from records_full where kind = 'hook'
),

-- the session's tool calls (call_pairs.sql: a row per row of tool_calls)
tool_calls_ as (
    select session_key, call_id from call_pairs
),

attachments as (
    select
        r.record_id,
        0::bigint as hook_index,
        json_transform(r.native, '{"attachment": {
            "hookEvent": "VARCHAR", "hookName": "VARCHAR", "toolUseID": "VARCHAR", "command": "VARCHAR",
            "content": "VARCHAR", "stdout": "VARCHAR", "stderr": "VARCHAR", "exitCode": "JSON",
            "durationMs": "JSON", "timedOut": "BOOLEAN", "timeoutMs": "JSON",
            "blockingError": {"blockingError": "VARCHAR", "command": "VARCHAR"}
        }}').attachment as a,
        r.native->'$.attachment.response' as response,
        r.native_subtype,
    from hook_records as r
    where r.native_type = 'attachment'
),

from_attachments as (
    select
        record_id,
        hook_index,
        a.hookEvent as native_event,
        a.hookName as hook_name,
        coalesce(a.command, a.blockingError.command) as command,
        case native_subtype
            when 'hook_success' then 'success'
            when 'hook_non_blocking_error' then 'non_blocking_error'
            when 'hook_blocking_error' then 'blocked'
            when 'hook_cancelled' then 'cancelled'
            when 'hook_error_during_execution' then 'error'
            when 'async_hook_response' then 'async_response'
        end as status,
        a.stdout,
        a.stderr,
        a.content,
        a.blockingError.blockingError as blocking_error,
        -- counts are JSON integers only (number_faults.sql declares any other form lost)
        json_bigint(a.exitCode) as exit_code,
        json_bigint(a.durationMs) as duration_ms,
        a.timedOut as is_timed_out,
        json_bigint(a.timeoutMs) as timeout_ms,
        a.toolUseID as tool_use_id,
        cast(null as bigint) as hook_count,
        cast(null as json) as hook_errors,
        cast(null as boolean) as is_prevented_continuation,
        cast(null as varchar) as stop_reason,
        cast(null as boolean) as has_output,
        response,
        'attachment' as native_form,
    from attachments
),

-- one parse per line for the three fields (the progress lines are most of the hook records)
progress_fields as (
    select
        *,
        json_extract_string(native, ['$.data.hookEvent', '$.data.hookName', '$.data.command']) as fields,
    from hook_records
    where native_type = 'progress'
),

from_progress as (
    select
        record_id,
        0::bigint as hook_index,
        fields[1] as native_event,
        fields[2] as hook_name,
        fields[3] as command,
        'started' as status,
        cast(null as varchar) as stdout,
        cast(null as varchar) as stderr,
        cast(null as varchar) as content,
        cast(null as varchar) as blocking_error,
        cast(null as bigint) as exit_code,
        cast(null as bigint) as duration_ms,
        cast(null as boolean) as is_timed_out,
        cast(null as bigint) as timeout_ms,
        tool_use_id,
        cast(null as bigint) as hook_count,
        cast(null as json) as hook_errors,
        cast(null as boolean) as is_prevented_continuation,
        cast(null as varchar) as stop_reason,
        cast(null as boolean) as has_output,
        cast(null as json) as response,
        'progress' as native_form,
    from progress_fields
),

-- materialized: the rows are selected before the hookInfos JSON is read
summaries as materialized (
    select
        record_id,
        tool_use_id,
        native,
        native->'$.hookInfos' as infos,
        case when json_type(native->'$.hookInfos') = 'ARRAY'
            then json_array_length(native->'$.hookInfos') else 0 end as info_count,
    from hook_records
    where native_type = 'system' and native_subtype = 'stop_hook_summary'
),

summary_entries as (
    select
        record_id,
        unnest(range(info_count::bigint)) as hook_index,
    from summaries
    where info_count > 0
),

from_summaries as (
    select
        s.record_id,
        e.hook_index,
        cast(null as varchar) as native_event,
        cast(null as varchar) as hook_name,
        json_extract_string(s.infos, '$[' || e.hook_index || '].command') as command,
        'summarized' as status,
        cast(null as varchar) as stdout,
        cast(null as varchar) as stderr,
        cast(null as varchar) as content,
        cast(null as varchar) as blocking_error,
        cast(null as bigint) as exit_code,
        json_bigint(json_extract(s.infos, '$[' || e.hook_index || '].durationMs')) as duration_ms,
        cast(null as boolean) as is_timed_out,
        cast(null as bigint) as timeout_ms,
        s.tool_use_id,
        json_bigint(s.native->'$.hookCount') as hook_count,
        s.native->'$.hookErrors' as hook_errors,
        try_cast(s.native->'$.preventedContinuation' as boolean) as is_prevented_continuation,
        s.native->>'$.stopReason' as stop_reason,
        try_cast(s.native->'$.hasOutput' as boolean) as has_output,
        cast(null as json) as response,
        'stop_hook_summary' as native_form,
    from summaries as s
    left join summary_entries as e using (record_id)
),

system_lines as (
    select
        record_id,
        tool_use_id,
        regexp_replace(native->>'$.content', '\x1b\[[0-9;]*m', '', 'g') as plain,
    from hook_records
    where native_type = 'system' and native_subtype is null
),

system_parsed as (
    select
        *,
        regexp_extract(plain, '^Running (\S+)\.\.\.$', 1) as started_name,
        regexp_extract(
            plain,
            '(?s)^(\S+) \[(.*?)\] (completed successfully|failed with non-blocking status code (-?\d+)'
                || '|failed to run|cancelled|JSON validation failed)(?::\s?(.*))?$',
            ['name', 'command', 'verb', 'code', 'rest']
        ) as m,
    from system_lines
),

from_system as (
    select
        record_id,
        0::bigint as hook_index,
        split_part(coalesce(nullif(started_name, ''), nullif(m.name, '')), ':', 1) as native_event,
        coalesce(nullif(started_name, ''), nullif(m.name, '')) as hook_name,
        nullif(m.command, '') as command,
        case
            when started_name <> '' then 'started'
            when m.verb = 'completed successfully' then 'success'
            when m.verb like 'failed with non-blocking status code%' then 'non_blocking_error'
            when m.verb = 'JSON validation failed' then 'non_blocking_error'
            when m.verb = 'failed to run' then 'error'
            when m.verb = 'cancelled' then 'cancelled'
        end as status,
        case when m.verb = 'completed successfully' then nullif(m.rest, '') end as stdout,
        case when m.verb like 'failed with non-blocking%' then m.rest end as stderr,
        plain as content,
        cast(null as varchar) as blocking_error,
        try_cast(nullif(m.code, '') as bigint) as exit_code,
        cast(null as bigint) as duration_ms,
        cast(null as boolean) as is_timed_out,
        cast(null as bigint) as timeout_ms,
        tool_use_id,
        cast(null as bigint) as hook_count,
        cast(null as json) as hook_errors,
        cast(null as boolean) as is_prevented_continuation,
        cast(null as varchar) as stop_reason,
        cast(null as boolean) as has_output,
        cast(null as json) as response,
        'system' as native_form,
    from system_parsed
),

reports as (
    select * from from_attachments
    union all by name
    select * from from_progress
    union all by name
    select * from from_summaries
    union all by name
    select * from from_system
),

final as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        h.hook_index,
        r.position,
        r.timestamp as recorded_at,
        case
            when h.native_form = 'stop_hook_summary' then 'stop'
            else lower(regexp_replace(h.native_event, '([a-z0-9])([A-Z])', '\1_\2', 'g'))
        end as event,
        h.native_event,
        h.hook_name,
        h.command,
        h.status,
        h.stdout,
        h.stderr,
        h.content,
        h.blocking_error,
        h.exit_code,
        h.duration_ms,
        h.is_timed_out,
        h.timeout_ms,
        h.tool_use_id,
        c.call_id,
        case
            when h.tool_use_id is not null and h.command is not null then h.tool_use_id || '|' || h.command
            else r.record_id || '#' || coalesce(h.hook_index, 0)
        end as execution_key,
        h.hook_count,
        h.hook_errors,
        h.is_prevented_continuation,
        h.stop_reason,
        h.has_output,
        h.response,
        h.native_form,
        r.native,
    from reports as h
    join hook_records as r using (record_id)
    left join tool_calls_ as c
        on c.session_key = r.session_key
        and c.call_id = h.tool_use_id
)

select * from final
order by session_key, seq, hook_index
