-- number_faults: one row per count that is present but is no integer fitting its column (a float, a
-- string, a boolean, or an integer beyond 64 bits). Its column is null (not reported), the line keeps
-- the value verbatim, and losses.sql declares it (category number_not_mapped), naming field and position.
-- Counts read: message.usage (observations.sql lists those faults), compaction metadata, a stop hook
-- summary's hookCount and hookInfos[k].durationMs, hook attachments' exitCode, durationMs and
-- timeoutMs, a tool result's exitCode, task.exitCode and afkTimeoutMs, an api-request's keep, the
-- cleared_* counts of a response's context_management.applied_edits, a cost-state's
-- modelUsage.<model> token counts and a file-history-snapshot's trackedFileBackups.<path>.version;
-- each SQL file reading one takes it with json_bigint (sql/macros/json_bigint.sql): JSON integers only.
-- Work table: written per batch, read by losses.sql over all batches.
-- reads: classified
with usage_faults as (
    select session_key, source_file, line, position, unnest(number_faults) as fault
    from classified
    where len(number_faults) > 0
),

-- the other counts, by the kind of line that holds them
count_fields as (
    select
        session_key,
        source_file,
        line,
        position,
        json,
        case
            when native_type = 'system' and native_subtype = 'compact_boundary'
                then ['compactMetadata.preTokens', 'compactMetadata.postTokens', 'compactMetadata.durationMs']
            when native_type = 'system' and native_subtype = 'microcompact_boundary'
                then ['microcompactMetadata.tokensSaved']
            when native_type = 'system' and native_subtype = 'stop_hook_summary' then ['hookCount']
            when native_type = 'api-request' then ['keep']
            when native_type = 'attachment'
                then ['attachment.exitCode', 'attachment.durationMs', 'attachment.timeoutMs']
            else ['toolUseResult.exitCode', 'toolUseResult.task.exitCode', 'toolUseResult.afkTimeoutMs']
        end as fields,
    from classified
    where (native_type = 'system' and native_subtype in ('compact_boundary', 'microcompact_boundary', 'stop_hook_summary'))
        or (native_type = 'attachment' and (starts_with(native_subtype, 'hook_') or native_subtype = 'async_hook_response'))
        or (native_type = 'user' and regexp_matches(tool_use_result, '"(exitCode|afkTimeoutMs)"'))
        or native_type = 'api-request'
),

-- counts under keys the line names itself (a model, a file path): read by JSON pointer, the key escaped.
-- The object holding them is read once per line, and its keys are unnested in the select list: a
-- lateral unnest would join its rows back to their line on the whole line's text.
keyed_counts as (
    select
        session_key,
        source_file,
        line,
        position,
        if(native_type = 'cost-state', 'modelUsage', 'snapshot/trackedFileBackups') as base,
        json_extract(json, '/' || base) as counts,
        if(
            native_type = 'cost-state',
            ['inputTokens', 'outputTokens', 'cacheReadInputTokens', 'cacheCreationInputTokens', 'thinkingTokens',
             'webSearchRequests'],
            ['version']
        ) as leaves,
    from classified
    where native_type in ('cost-state', 'file-history-snapshot')
),

keyed_keys as (
    select session_key, source_file, line, position, base, counts, leaves,
        unnest(coalesce(json_keys(counts), [])) as key,
    from keyed_counts
),

keyed_leaves as (
    select session_key, source_file, line, position, base, counts, key, unnest(leaves) as leaf,
    from keyed_keys
),

keyed_values as (
    select
        session_key, source_file, line, position,
        replace(base, '/', '.') || '.' || key || '.' || leaf as field,
        json_extract(counts, '/' || replace(replace(key, '~', '~0'), '/', '~1') || '/' || leaf) as v,
    from keyed_leaves
),

-- responses that can hold applied_edits, picked before any JSON is read: the unnest below would
-- otherwise parse every line of the batch for its array length
edit_lines as materialized (
    select session_key, source_file, line, position, json,
    from classified
    where native_type = 'assistant' and contains(json, '"applied_edits"')
),

-- the cleared_* counts of each context_management.applied_edits entry of a response
edit_values as (
    select
        session_key, source_file, line, position,
        'message.context_management.applied_edits[' || (k - 1) || '].' || leaf as field,
        json_extract(json, '$.message.context_management.applied_edits[' || (k - 1) || '].' || leaf) as v,
    from edit_lines,
        unnest(range(1, coalesce(json_array_length(json, '$.message.context_management.applied_edits'), 0)::bigint + 1)) as u(k),
        unnest(['cleared_input_tokens', 'cleared_tool_uses', 'cleared_thinking_turns']) as l(leaf)
),

count_values as (
    select session_key, source_file, line, position, field, json_extract(json, '$.' || field) as v,
    from count_fields, unnest(fields) as u(field)

    union all

    -- one duration per hookInfos entry of a stop hook summary
    select
        session_key, source_file, line, position,
        'hookInfos[' || (k - 1) || '].durationMs' as field,
        json_extract(json, '$.hookInfos[' || (k - 1) || '].durationMs') as v,
    from count_fields, unnest(range(1, coalesce(json_array_length(json, '$.hookInfos'), 0)::bigint + 1)) as u(k)
    where contains(json, '"stop_hook_summary"')
),

-- every count read, materialized: a filter on the values would be pushed below their extraction
-- and read each of them twice
all_values as materialized (
    select * from count_values
    union all
    select * from keyed_values
    union all
    select * from edit_values
),

final as (
    select
        session_key,
        source_file,
        line,
        position,
        split_part(fault, '=', 1) as field,
        substr(fault, strpos(fault, '=') + 1) as native_value,
    from usage_faults

    union all

    select session_key, source_file, line, position, field, v::varchar as native_value,
    from all_values
    where json_type(v) <> 'NULL' and json_bigint(v) is null
)

select * from final
order by session_key, source_file, line, field
