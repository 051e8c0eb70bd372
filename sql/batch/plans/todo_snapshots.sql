-- todo_snapshots: one row per user line carrying a todos snapshot, with the owner of its stream.
-- Shared by plans.sql and plan_items.sql, which apply the same todo snapshot rule.
-- Materialized, so its conditions run in the written order before any join: the substring test
-- on user lines only, the JSON on the lines it selects.
-- reads: record_owners, records_full
with user_lines_with_todos as materialized (
    select *
    from records_full
    where native_type = 'user' and contains(native, '"todos"') and json_type(native, '$.todos') = 'ARRAY'
),

final as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        r.position,
        r.timestamp,
        r.native -> '$.todos' as todos,
        o.native_session_id,
        o.todo_agent,
    from user_lines_with_todos as r
    join record_owners as o using (record_id)
)

select * from final
