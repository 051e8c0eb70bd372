-- compactions: one row per compaction. Registry entry, Notes: a compact_boundary and the
-- following user record flagged isCompactSummary form one compaction (the summary is not a
-- message, ASR-373); compactMetadata.durationMs -> durationMs. Server-side context edits
-- (context_management.applied_edits) report counts only -> compaction with kind prune and
-- replaces {state: unknown}: one row per applied_edits entry, on the response holding it.
-- microcompact_boundary (2.1.9-2.1.22) -> kind micro, replacing the compactedToolIds' results.
-- The core folds a boundary and its summary line into one record of kind compaction
-- (sql/batch/records/observation_keys.sql); both lines are read here from the observations (the narrow index
-- joined with the classified columns read).
-- rows first, then JSON: the live lines read below are a boundary, a compact summary, or a
-- response whose line names applied_edits (the client writes keys unescaped, so such a line
-- contains the key verbatim); only those few are decoded
-- reads: classified, observation_index, records_full
with live as (
    select
        i.record_id, i.ord, c.native_type, c.native_subtype, c.uuid, c.logical_parent_uuid, c.timestamp,
        c.is_compact_summary, c.summary_content as content, c.content_type, c.json,
    from observation_index as i
    join classified as c using (ord)
    where i.is_live and (
        (native_type = 'system' and native_subtype in ('compact_boundary', 'microcompact_boundary'))
        or is_compact_summary
        or (native_type = 'assistant' and contains(json, '"applied_edits"'))
    )
),

records_ as (
    select record_id, session_key, seq, position, timestamp, logical_parent_record_id, native, kind,
    from records_full
    where kind = 'compaction' or record_id in (select record_id from live)
),

compaction_records as (
    select * from records_ where kind = 'compaction'
),

boundaries as (
    select
        record_id,
        native_subtype,
        logical_parent_uuid,
        timestamp,
        json,
    from live
    where native_type = 'system' and native_subtype in ('compact_boundary', 'microcompact_boundary')
    qualify row_number() over (partition by record_id order by ord desc) = 1
),

summaries as (
    select
        record_id,
        uuid as summary_uuid,
        case
            when content_type = 'VARCHAR' then json_extract_string(content, '$')
            when content_type = 'ARRAY' then array_to_string(
                list_filter(json_extract_string(content, '$[*].text'), lambda x: x is not null), chr(10)
            )
        end as summary,
    from live
    where is_compact_summary
    qualify row_number() over (partition by record_id order by ord desc) = 1
),

full_and_micro as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        cast(null as bigint) as edit_index,
        r.position,
        coalesce(b.timestamp, r.timestamp) as recorded_at,
        case when b.native_subtype = 'microcompact_boundary' then 'micro' else 'full' end as compaction_kind,
        cast(null as varchar) as edit_type,
        coalesce(b.json->'$.compactMetadata', b.json->'$.microcompactMetadata') as metadata,
        s.summary,
        s.summary_uuid,
        r.logical_parent_record_id,
        b.logical_parent_uuid,
        coalesce(b.json, r.native) as native,
    from compaction_records as r
    left join boundaries as b using (record_id)
    left join summaries as s using (record_id)
),

responses as (
    select
        record_id,
        timestamp,
        json,
        json->'$.message.context_management.applied_edits' as edits,
    from live
    where native_type = 'assistant'
        and json_type(json->'$.message.context_management.applied_edits') = 'ARRAY'
        and json_array_length(json->'$.message.context_management.applied_edits') > 0
    qualify row_number() over (partition by record_id order by ord desc) = 1
),

edit_entries as (
    select
        record_id,
        unnest(range(json_array_length(edits)::bigint)) as edit_index,
    from responses
),

prunes as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        e.edit_index,
        r.position,
        p.timestamp as recorded_at,
        'prune' as compaction_kind,
        json_extract_string(p.edits, '$[' || e.edit_index || '].type') as edit_type,
        json_extract(p.edits, '$[' || e.edit_index || ']') as metadata,
        cast(null as varchar) as summary,
        cast(null as varchar) as summary_uuid,
        cast(null as varchar) as logical_parent_record_id,
        cast(null as varchar) as logical_parent_uuid,
        p.json as native,
    from responses as p
    join edit_entries as e using (record_id)
    join records_ as r using (record_id)
),

rows_ as (
    select * from full_and_micro
    union all by name
    select * from prunes
),

final as (
    select
        record_id,
        session_key,
        seq,
        edit_index,
        position,
        recorded_at,
        compaction_kind,
        edit_type,
        metadata->>'$.trigger' as trigger,
        -- counts are JSON integers only (number_faults.sql declares any other form lost)
        json_bigint(metadata->'$.preTokens') as pre_tokens,
        json_bigint(metadata->'$.postTokens') as post_tokens,
        case compaction_kind
            when 'micro' then json_bigint(metadata->'$.tokensSaved')
            when 'prune' then json_bigint(metadata->'$.cleared_input_tokens')
        end as tokens_saved,
        case when compaction_kind = 'full' then json_bigint(metadata->'$.durationMs') end as duration_ms,
        case compaction_kind
            when 'micro' then case when json_type(metadata->'$.compactedToolIds') = 'ARRAY'
                then json_array_length(metadata->'$.compactedToolIds')::bigint end
            when 'prune' then json_bigint(metadata->'$.cleared_tool_uses')
        end as cleared_tool_uses,
        case when compaction_kind = 'prune'
            then json_bigint(metadata->'$.cleared_thinking_turns') end as cleared_thinking_turns,
        summary,
        summary_uuid,
        case when json_type(metadata->'$.compactedToolIds') = 'ARRAY'
            then json_extract_string(metadata, '$.compactedToolIds[*]') end as compacted_call_ids,
        case when json_type(metadata->'$.clearedAttachmentUUIDs') = 'ARRAY'
            then json_extract_string(metadata, '$.clearedAttachmentUUIDs[*]') end as cleared_attachment_uuids,
        logical_parent_record_id,
        logical_parent_uuid,
        case compaction_kind
            when 'full' then 'prefix'
            when 'micro' then 'tool_results'
            else 'unknown'
        end as replaces,
        metadata,
        native,
    from rows_
)

select * from final
order by session_key, seq, edit_index nulls first
