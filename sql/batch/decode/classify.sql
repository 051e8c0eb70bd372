-- classify: decoded observations with their ASR record kind, author, origin, via, trigger and peer
-- columns (the new columns after the observation's, is_compact_summary replaced where it is).
-- Who wrote a message is read from origin.kind, isMeta and the text markers, not from the record
-- type (registry entry, "Who wrote a message"); where no marker says, author stays null.
-- A text marker is tested on text_head without its leading Unicode white space (the White_Space
-- characters: RE2's \s alone is ASCII).
-- reads: observed
with obs as (
    select
        *,
        -- every marker starts with `<`: a head without one is tested as empty
        case when contains(text_head, '<') then regexp_replace(
            text_head,
            '^[\s\x{0B}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]+', ''
        ) else '' end as marked_head,
    from observed
),

flags as (
    select
        *,
        coalesce(model = '<synthetic>', false) or coalesce(is_api_error, false) as synthetic,
        native_type = 'user' and (
            coalesce(first_block_type = 'tool_result', false)
            or starts_with(marked_head, '<bash-stdout>') or starts_with(marked_head, '<bash-stderr>')
        ) as tool_result,
        native_type = 'user' and coalesce(is_compact_summary, false) as compact_summary,
        coalesce(origin_kind = 'human', false) as human,
        turn_origin is not null and turn_origin not in ('human', 'sdk', 'user') as has_trigger,
        coalesce(origin_kind = 'task-notification', false) as notified,
        coalesce(origin_kind = 'peer', false) as peer,
    from obs
),

final as (
    select
        * exclude (marked_head, synthetic, tool_result, compact_summary, human, has_trigger, notified, peer)
            replace (compact_summary as is_compact_summary),
        case
            when native_type = 'assistant' then 'message'
            when compact_summary then 'compaction'
            when tool_result then 'tool_result'
            when native_type = 'user' then 'message'
            when native_type = 'system' then case
                when native_subtype is null and tool_use_id is not null then 'hook'
                else case native_subtype
                    when 'compact_boundary' then 'compaction'
                    when 'microcompact_boundary' then 'compaction'
                    when 'stop_hook_summary' then 'hook'
                    when 'local_command' then 'message'
                    when 'api_error' then 'error'
                    when 'turn_duration' then 'turn_stats'
                    when 'away_summary' then 'message'
                    when 'informational' then 'message'
                    when 'memory_saved' then 'memory_change'
                    else 'unknown'
                end
            end
            when native_type in (
                'summary', 'ai-title', 'custom-title', 'agent-name', 'tag', 'last-prompt', 'pr-link',
                'worktree-state', 'continued-in', 'fork-context-ref', 'agent-color', 'agent-setting', 'relocated'
            ) then 'session_info'
            when native_type in ('permission-mode', 'mode') then 'config_change'
            -- file-history-delta and bridge-session are not named by the registry entry: kind unknown
            when native_type = 'file-history-snapshot' then 'checkpoint'
            when native_type = 'cost-state' then 'usage_summary'
            when native_type in ('api-request', 'api-request-blob', 'api-request-shape') then 'request_context'
            when native_type = 'queue-operation' then 'queue_operation'
            when native_type = 'progress' then case when native_subtype = 'hook_progress' then 'hook' else 'progress' end
            when native_type = 'attachment' then case
                when native_subtype in (
                    'hook_success', 'hook_non_blocking_error', 'hook_blocking_error', 'hook_cancelled',
                    'hook_error_during_execution', 'async_hook_response'
                ) then 'hook'
                when native_subtype = 'hook_additional_context' then 'message'
                else 'attachment'
            end
            else 'unknown'
        end as kind,
        case
            when native_type = 'assistant' then case when synthetic then 'harness' else 'model' end
            when tool_result then 'tool'
            when compact_summary then 'harness'
            when native_type = 'attachment' and native_subtype = 'hook_additional_context' then 'hook'
            when human then 'human'
            when coalesce(origin_kind in ('peer', 'coordinator', 'observer'), false) then 'agent'
            when origin_kind = 'task-notification' then 'harness'
            when coalesce(is_meta, false) then 'harness'
            when native_type = 'user' and starts_with(marked_head, '<local-command-stdout>') then 'harness'
            when native_type in ('system', 'attachment', 'progress', 'api-request', 'api-request-blob', 'api-request-shape')
                then 'harness'
        end as author,
        case
            when tool_result then 'tool'
            when compact_summary then 'compaction'
            when native_type = 'attachment' and native_subtype = 'queued_command' and human then 'steer'
            when human then 'prompt'
            when origin_kind = 'peer' then 'inter_session'
            when origin_kind = 'task-notification' then 'injected'
            when coalesce(is_meta, false) or native_type = 'attachment' then 'injected'
            when starts_with(marked_head, '<command-name>') or starts_with(marked_head, '<command-message>') then 'command'
            when native_type = 'system' and native_subtype = 'local_command' then 'command'
        end as origin,
        case when origin_kind = 'channel' then 'channel' end as via,
        case
            when notified and coalesce(origin_subkind = 'scheduled-trigger', false) then 'schedule'
            when has_trigger then case turn_origin
                when 'scheduled' then 'schedule'
                when 'task_notification' then 'task_completion'
                when 'auto_continuation' then 'auto_continuation'
                when 'peer' then 'peer'
            end
            when notified then 'task_completion'
            when scheduled_task_id is not null then 'schedule'
        end as trigger_kind,
        case when has_trigger then turn_origin end as trigger_native,
        scheduled_task_id as trigger_id,
        scheduled_fire_id as trigger_run_id,
        fire_reason as trigger_reason,
        case when peer then origin_from_session end as from_session_id,
        case when peer then origin_from end as from_address,
        case when peer then origin_name end as from_name,
        synthetic and native_type = 'assistant' as is_synthetic,
    from flags
)

select * from final
