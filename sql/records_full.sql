-- records_full: one row per ASR record, with the usage of its latest observation.
-- Attributes come from the record's first-seen observation, usage and stop reason from the
-- latest one (registry entry, Position basis); seq follows file position, never timestamps.
-- reads: batch_files, classified, observation_index, observation_keys
-- result: large
with live as (
    select * from observation_keys where is_live
),

-- the first-seen and the latest observation of each record, chosen on the narrow index
record_ends as (
    select
        record_id,
        arg_min(ord, (uuid_first_ord, ord)) as first_ord,
        max(ord) as last_ord,
    from observation_index
    where is_live
    group by record_id
),

-- the wide text columns stay out of these two: the native JSON (of the latest observation) and
-- toolUseResult (of the first) are named by ord and joined from `classified` by the pipeline
first_obs as (
    select o.* exclude (json, content, top_content, text_head, tool_use_result)
    from observation_keys as o
    join record_ends as e on o.ord = e.first_ord
),

last_obs as (
    select o.* exclude (json, content, top_content, text_head, tool_use_result)
    from observation_keys as o
    join record_ends as e on o.ord = e.last_ord
),

uuid_map as (
    select c.session_key, c.uuid, i.record_id
    from observation_index as i
    join classified as c using (ord)
    where i.is_live and c.uuid is not null
),

-- Subagent streams whose launch prompt the registry entry identifies: "by the sidecar toolUseId and
-- the parent result's agentId", both naming the same call. Their first prompt was written by the
-- parent agent. With only one of the two (every sidecar before 2.1.2xx lacks toolUseId) the sender
-- is not identified: the first record alone does not identify it, so its author stays null.
sidecar_calls as (
    select session_key, json_extract_string(sidecar, '$.toolUseId') as call_id
    from batch_files
    where stream_kind = 'subagent' and json_extract_string(sidecar, '$.toolUseId') is not null
),

result_calls as (
    select
        coalesce(f.parent_session_id, f.session_id) || '/' || json_extract_string(o.tool_use_result, '$.agentId')
            as session_key,
        json_extract_string(o.content, '$[*].tool_use_id') as call_ids,
    from live as o
    join batch_files as f using (file_idx)
    where contains(o.tool_use_result, 'agentId') and json_extract_string(o.tool_use_result, '$.agentId') is not null
),

launched as (
    select distinct s.session_key
    from sidecar_calls as s
    join result_calls as r on r.session_key = s.session_key and list_contains(r.call_ids, s.call_id)
),

-- agent_progress lines embed a subagent's own messages: each is linked to the subagent record
-- it copies (from its transcript file, or rebuilt from these copies when the file is absent)
progress_copies as (
    select
        f.record_id,
        coalesce(bf.parent_session_id, bf.session_id) || '/' || f.progress_agent_id as child_session_key,
        c.json->>'$.data.message.uuid' as copy_uuid,
    from first_obs as f
    join batch_files as bf using (file_idx)
    join classified as c using (ord)
    where f.native_subtype = 'agent_progress' and f.progress_agent_id is not null
),

-- MCP attribution may be on any line of a response
attribution as (
    select
        i.record_id,
        max(c.attribution_mcp_server) as attribution_mcp_server,
        max(c.attribution_mcp_tool) as attribution_mcp_tool,
    from observation_index as i
    join classified as c using (ord)
    where i.is_live and (c.attribution_mcp_server is not null or c.attribution_mcp_tool is not null)
    group by i.record_id
),

launch_prompts as (
    select session_key, min(uuid_first_ord) as launch_ord
    from first_obs
    where native_type = 'user' and kind = 'message'
        and session_key in (select session_key from launched)
    group by session_key
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
        case when lp.launch_ord is not null then 'agent' else f.author end as author,
        case when lp.launch_ord is not null then 'prompt' else f.origin end as origin,
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
        att.attribution_mcp_server,
        att.attribution_mcp_tool,
        p.record_id as parent_record_id,
        lpu.record_id as logical_parent_record_id,
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
        cp.record_id as copy_of_record_id,
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
    from first_obs as f
    join last_obs as l on l.record_id = f.record_id
    left join uuid_map as p on p.session_key = f.session_key and p.uuid = f.parent_uuid
    left join uuid_map as lpu on lpu.session_key = f.session_key and lpu.uuid = f.logical_parent_uuid
    left join launch_prompts as lp on lp.session_key = f.session_key and lp.launch_ord = f.uuid_first_ord
    left join attribution as att on att.record_id = f.record_id
    left join progress_copies as pc on pc.record_id = f.record_id
    left join uuid_map as cp on cp.session_key = pc.child_session_key and cp.uuid = pc.copy_uuid
),

-- queue-operation remove: the queued message it pulls back is withdrawn (registry entry, Notes):
-- the latest earlier enqueue of the stream with the same content (any, when remove has none).
-- A remove with reason absorbed_mid_turn is not a withdrawal: the message was delivered mid-turn
-- (a queued_command attachment follows it).
-- (read from first_obs and record_ends, not from `joined`: with one reader that wide relation
-- is not materialized)
queue_ops as (
    select
        f.record_id, f.session_key, f.record_first_ord, f.native_subtype as operation,
        c.json->'$.content' as content, c.json->>'$.reason' as reason,
    from first_obs as f
    join record_ends as e on e.record_id = f.record_id
    join classified as c on c.ord = e.last_ord
    where f.native_type = 'queue-operation'
),

withdrawn as (
    select arg_max(e.record_id, e.record_first_ord) as record_id
    from queue_ops as r
    join queue_ops as e
        on e.session_key = r.session_key
        and e.operation = 'enqueue'
        and e.record_first_ord < r.record_first_ord
        and (r.content is null or e.content = r.content)
    where r.operation = 'remove' and r.reason is distinct from 'absorbed_mid_turn'
    group by r.record_id
),

final as (
    select
        *,
        case when record_id in (select record_id from withdrawn) then 'withdrawn' end as status,
        row_number() over (partition by session_key order by record_first_ord) as seq,
        last_value(prompt_id ignore nulls) over (
            partition by session_key order by record_first_ord
            rows between unbounded preceding and current row
        ) as turn_id,
    from joined
)

select * from final
order by session_key, seq
