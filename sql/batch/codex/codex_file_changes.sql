-- codex_file_changes: one row per path a FileChange item of a paginated Codex thread changed
-- (formats/codex/items.py gives the items, with their record and call).
-- A FileChange item (reference §14.3: {changes: {<path>: {type: add|delete|update, ...}}, status,
-- stdout, stderr}) says what Codex applied for a patch call. As the Claude Code entry maps a
-- successful Edit or Write call, each path it changed is a change by the model (source file_change,
-- cause_actor model) of kind create (add), delete or update, in the order the item lists them; the
-- path's change object (unified_diff, move_path, content) is the row's native.
-- reads: codex_file_change_items
with items as (
    select
        record_id, session_key, call_id, seq, tool_name, changed_at,
        map_entries(try(json_transform(changes, '"MAP(VARCHAR, JSON)"'))) as entries,
    from codex_file_change_items
),

changes as (
    select
        record_id, session_key, call_id, seq, tool_name, changed_at,
        unnest(range(len(entries))) as file_index,
        unnest(entries) as entry,
    from items
    where entries is not null
),

final as (
    select
        record_id,
        session_key,
        call_id,
        seq,
        file_index,
        'file_change' as source,
        tool_name,
        entry.key as path,
        case entry.value ->> '$.type'
            when 'add' then 'create'
            else entry.value ->> '$.type'
        end as change_kind,
        'model' as cause_actor,
        changed_at,
        entry.value as native,
    from changes
)

select * from final
order by session_key, seq, file_index
