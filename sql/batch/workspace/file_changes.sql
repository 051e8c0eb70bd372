-- file_changes: one row per file change fact.
-- Registry entry, Workspace and VCS: edited_text_file -> file_change with cause {actor: external,
-- observed: true}. bashEditDiff -> file_change: keep a boolean moreFiles as recorded; for a
-- nonnegative integer count, map 0 to false and a positive count to true, retaining the count
-- (com.anthropic.claude-code/moreFilesCount); for negative or nonintegral values, retain the
-- native value and omit the normalized boolean; userModified -> modifiedByUser.
-- Every Edit, Write, MultiEdit and NotebookEdit call with a result that is not an error is a file
-- change by the model (tool kind edit), also when its result line keeps no toolUseResult.
-- rows first, then JSON: only completed edit calls are decoded, and their result (which
-- carries the whole file text) is parsed once for the fields read below
-- reads: batch_tool_calls, records_full, result_calls
with completed_edits as (
    select
        session_key, call_id, tool_name, requested_by, result_record_id, input, result_native,
        -- toolUseResult is re-serialized JSON: an object starts with '{'; a string is an error or denial text
        result_native is null or starts_with(result_native, '{') as has_result_object,
    from batch_tool_calls
    where tool_name in ('Edit', 'Write', 'MultiEdit', 'NotebookEdit')
        and status = 'completed'
),

edit_results as (
    select
        *,
        json_extract(result_native, ['$.error', '$.filePath', '$.type', '$.userModified']) as result_fields,
    from completed_edits
    where has_result_object
),

edit_calls as (
    select
        c.* exclude (result_fields),
        json_extract_string(result_fields[2], '$') as result_path,
        json_extract_string(result_fields[3], '$') as result_type,
        result_fields[4] as user_modified,
        r.seq,
        r.timestamp,
    from edit_results as c
    join records_full as r on r.record_id = c.result_record_id
    where coalesce(json_extract_string(c.result_fields[1], '$'), '') = ''
),

tool_facts as (
    select
        result_record_id as record_id,
        session_key,
        call_id,
        seq,
        0::bigint as file_index,
        'tool_result' as source,
        tool_name,
        coalesce(
            result_path,
            input ->> 'file_path',
            input ->> 'notebook_path'
        ) as path,
        case tool_name
            when 'Edit' then 'edit'
            when 'MultiEdit' then 'edit'
            when 'NotebookEdit' then 'notebook_edit'
            when 'Write' then case result_type
                when 'create' then 'create'
                when 'update' then 'update'
                else 'write'
            end
        end as change_kind,
        coalesce(requested_by, 'model') as cause_actor,
        null::boolean as is_observed,
        case when json_type(user_modified) = 'BOOLEAN' then user_modified::boolean end as is_modified_by_user,
        null::json as more_files_native,
        timestamp as changed_at,
        result_native as native,
    from edit_calls
),

-- toolUseResult is re-serialized JSON, so a result with a bashEditDiff key contains the key's
-- name verbatim: only those few records are decoded
bash_records as (
    select record_id, session_key, seq, timestamp, tool_use_result -> '$.bashEditDiff' as diff,
    from records_full
    where contains(tool_use_result, '"bashEditDiff"')
        and json_type(tool_use_result, '$.bashEditDiff') = 'OBJECT'
),

bash_diffs as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        r.timestamp,
        p.call_id,
        c.tool_name,
        c.requested_by,
        r.diff,
    from bash_records as r
    left join result_calls as p using (record_id)
    left join batch_tool_calls as c on c.session_key = r.session_key and c.call_id = p.call_id
),

changed_files as (
    select
        record_id,
        unnest(json_extract_string(diff, '$.changedFiles[*]')) as path,
        unnest(range(json_array_length(diff, '$.changedFiles')::bigint)) as changed_index,
    from bash_diffs
    where json_type(diff, '$.changedFiles') = 'ARRAY'
),

diff_files as (
    select
        record_id,
        unnest(json_extract(diff, '$.files[*]')) as entry,
        unnest(range(json_array_length(diff, '$.files')::bigint)) as entry_index,
    from bash_diffs
    where json_type(diff, '$.files') = 'ARRAY'
),

diff_paths as (
    select
        coalesce(c.record_id, f.record_id) as record_id,
        coalesce(c.path, f.entry ->> 'filePath') as path,
        f.entry,
        coalesce(c.changed_index, 1000000 + f.entry_index) as path_order,
    from changed_files as c
    full outer join (select *, entry ->> 'filePath' as file_path from diff_files) as f
        on f.record_id = c.record_id and f.file_path = c.path
),

bash_rows as (
    select
        d.*,
        p.path,
        p.entry,
        coalesce(row_number() over (partition by d.record_id order by p.path_order) - 1, 0) as file_index,
        json_type(d.diff, '$.moreFiles') as more_files_type,
        d.diff -> '$.moreFiles' as more_files_native,
    from bash_diffs as d
    left join diff_paths as p using (record_id)
),

bash_normalized as (
    select
        *,
        case more_files_type
            when 'BOOLEAN' then more_files_native::boolean
            when 'UBIGINT' then more_files_native::ubigint > 0
            when 'BIGINT' then case when more_files_native::bigint >= 0 then more_files_native::bigint > 0 end
            when 'DOUBLE' then case
                when more_files_native::double >= 0 and more_files_native::double = floor(more_files_native::double)
                    then more_files_native::double > 0
            end
        end as more_files,
        case more_files_type
            when 'UBIGINT' then try_cast(more_files_native::ubigint as bigint)
            when 'BIGINT' then case when more_files_native::bigint >= 0 then more_files_native::bigint end
            when 'DOUBLE' then case
                when more_files_native::double >= 0 and more_files_native::double = floor(more_files_native::double)
                    then try_cast(more_files_native::double as bigint)
            end
        end as more_files_count,
    from bash_rows
),

-- a diff that lists no file is kept (one row, null path) only when it reports more files,
-- or a moreFiles value that cannot be normalized
bash_kept as (
    select *
    from bash_normalized
    where path is not null
        or entry is not null
        or more_files
        or (more_files is null and more_files_type is not null and more_files_type <> 'NULL')
),

bash_facts as (
    select
        record_id,
        session_key,
        call_id,
        seq,
        file_index,
        'bash_edit_diff' as source,
        tool_name,
        path,
        case
            when json_type(entry, '$.created') = 'BOOLEAN' and (entry -> '$.created')::boolean then 'create'
            when json_type(entry, '$.deleted') = 'BOOLEAN' and (entry -> '$.deleted')::boolean then 'delete'
            else 'bash_edit'
        end as change_kind,
        coalesce(requested_by, 'model') as cause_actor,
        null::boolean as is_observed,
        case when json_type(diff, '$.userModified') = 'BOOLEAN'
            then (diff -> '$.userModified')::boolean end as is_modified_by_user,
        more_files,
        more_files_count,
        more_files_native,
        timestamp as changed_at,
        diff as native,
    from bash_kept
),

external_facts as (
    select
        record_id,
        session_key,
        null::varchar as call_id,
        seq,
        0::bigint as file_index,
        'edited_text_file' as source,
        null::varchar as tool_name,
        native -> '$.attachment' ->> 'filename' as path,
        'external_edit' as change_kind,
        'external' as cause_actor,
        true as is_observed,
        null::boolean as is_modified_by_user,
        null::boolean as more_files,
        null::bigint as more_files_count,
        null::json as more_files_native,
        timestamp as changed_at,
        (native -> '$.attachment')::json as native,
    from records_full
    where native_type = 'attachment' and native_subtype = 'edited_text_file'
),

final as (
    select
        record_id, session_key, call_id, seq, file_index, source, tool_name, path, change_kind,
        cause_actor, is_observed, is_modified_by_user,
        null::boolean as more_files, null::bigint as more_files_count, more_files_native,
        changed_at, native,
    from tool_facts
    union all by name
    select * from bash_facts
    union all by name
    select * from external_facts
)

select * from final
order by session_key, seq, file_index
