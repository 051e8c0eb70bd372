-- records_full: one row per ASR record, with the usage of its latest observation.
-- Attributes come from the record's first-seen observation, usage and stop reason from the
-- latest one (registry entry, Position basis); seq follows file position, never timestamps.
-- What relates a record to the other records of its session (seq, turn, parent, logical parent and
-- copied records, the launch prompt of a subagent stream, the withdrawn status, MCP attribution) and
-- which observations are its first-seen and latest come from record_table.sql, which reads narrow
-- columns alone; this file reads those two observations of each record.
-- reads: observation_keys, record_table
-- result: large
-- hold: until release
-- the wide text columns stay out of these two: the native JSON (of the latest observation) and
-- toolUseResult (of the first) are named by ord and joined from `classified` by the pipeline
with first_obs as (
    select o.* exclude (json, content, top_content, text_head, tool_use_result)
    from observation_keys as o
    join record_table as e on o.ord = e.first_ord
),

last_obs as (
    select o.* exclude (json, content, top_content, text_head, tool_use_result)
    from observation_keys as o
    join record_table as e on o.ord = e.last_ord
),

joined as (
    select
        f.record_id,
        f.session_key,
        f.record_first_ord,
        f.kind,
        f.uuid_first_position as position,
        f.source_file,
        f.uuid_first_line as source_line,
        f.timestamp,
        case when r.is_launch_prompt then 'agent' else f.author end as author,
        case when r.is_launch_prompt then 'prompt' else f.origin end as origin,
        f.via,
        f.trigger_kind,
        f.trigger_native,
        f.trigger_id,
        f.trigger_run_id,
        f.trigger_reason,
        f.from_session_id,
        f.from_address,
        f.from_name,
        f.prompt_source,
        f.permission_mode,
        f.entrypoint,
        f.forked_from_session_id as copied_from_session_id,
        f.forked_from_uuid as copied_from_uuid,
        coalesce(l.tool_denial_kind, f.tool_denial_kind) as tool_denial_kind,
        coalesce(l.permission_decision, f.permission_decision) as permission_decision,
        coalesce(l.permission_source, f.permission_source) as permission_source,
        coalesce(l.permission_reason_type, f.permission_reason_type) as permission_reason_type,
        r.attribution_mcp_server,
        r.attribution_mcp_tool,
        r.parent_record_id,
        r.logical_parent_record_id,
        f.prompt_id,
        f.native_type,
        f.native_subtype,
        f.uuid,
        f.parent_uuid,
        f.native_session_id,
        f.native_agent_id,
        f.message_id,
        case when f.native_type = 'assistant' and not l.is_synthetic then f.message_id end as inference_id,
        coalesce(l.request_id, f.request_id) as request_id,
        coalesce(l.model, f.model) as model,
        f.is_sidechain,
        f.is_meta,
        coalesce(f.is_api_error, false) or f.is_synthetic as is_api_error,
        case when f.native_type = 'assistant' and f.live_count > 1 then 'folded' end as assembly_mode,
        f.observation_count,
        f.has_revision_history,
        l.record_source,
        r.copy_of_record_id,
        f.cwd,
        f.git_branch,
        l.version,
        l.ord as native_ord,
        -- usage of the latest observation
        l.stop_reason,
        l.has_usage and not l.is_synthetic as has_usage,
        l.input_tokens,
        l.output_tokens,
        l.cache_creation_input_tokens,
        l.cache_read_input_tokens,
        l.cache_creation_5m,
        l.cache_creation_1h,
        l.service_tier,
        l.position as usage_position,
        l.source_file as usage_source_file,
        l.line as usage_source_line,
        f.live_count as line_count,
        f.ord as tool_use_result_ord,
        f.tool_use_id,
        f.parent_tool_use_id,
        f.progress_agent_id,
        f.leaf_uuid,
        f.summary,
        f.custom_title,
        f.ai_title,
        r.status,
        r.seq,
        r.turn_id,
    from first_obs as f
    join last_obs as l on l.record_id = f.record_id
    join record_table as r on r.record_id = f.record_id
)

select * from joined
order by session_key, seq
