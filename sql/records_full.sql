-- records_full: one row per ASR record, with the usage of its latest observation.
-- Attributes come from the record's first-seen observation, usage and stop reason from the
-- latest one (registry entry, Position basis); seq follows file position, never timestamps.
with live as (
    select * from observation_keys where is_live
),

first_obs as (
    select * from live
    qualify row_number() over (partition by session_key, record_key order by uuid_first_ord, ord) = 1
),

last_obs as (
    select * from live where is_representative
),

uuid_map as (
    select session_key, uuid, record_id from live where uuid is not null
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
        f.author,
        f.origin,
        f.via,
        p.record_id as parent_record_id,
        lp.record_id as logical_parent_record_id,
        f.prompt_id,
        f.native_type,
        f.native_subtype,
        f.uuid,
        f.parent_uuid,
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
        f.cwd,
        f.git_branch,
        l.version,
        l.json as native,
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
        f.tool_use_result,
        f.tool_use_id,
        f.parent_tool_use_id,
        f.progress_agent_id,
        f.leaf_uuid,
        f.summary,
        f.custom_title,
        f.ai_title,
    from first_obs as f
    join last_obs as l using (session_key, record_key)
    left join uuid_map as p on p.session_key = f.session_key and p.uuid = f.parent_uuid
    left join uuid_map as lp on lp.session_key = f.session_key and lp.uuid = f.logical_parent_uuid
),

final as (
    select
        *,
        row_number() over (partition by session_key order by record_first_ord) as seq,
        last_value(prompt_id ignore nulls) over (
            partition by session_key order by record_first_ord
            rows between unbounded preceding and current row
        ) as turn_id,
    from joined
)

select * from final
order by session_key, seq
