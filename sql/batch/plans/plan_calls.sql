-- plan_calls: one row per call of a plan tool (ExitPlanMode, TodoWrite, TaskCreate, TaskUpdate,
-- TaskList, TaskGet), with its records, its tool_use block and the owner of its stream.
-- Shared by plans.sql and plan_items.sql.
-- The plan tool calls first, so only their blocks, records and owners are joined.
-- reads: batch_parts, batch_tool_calls, classified, record_owners, records_full
with tool_calls_ as (
    select * from batch_tool_calls
    where tool_name in ('ExitPlanMode', 'TodoWrite', 'TaskCreate', 'TaskUpdate', 'TaskList', 'TaskGet')
),

records as (
    select * from records_full
),

tool_uses as (
    select * from batch_parts
    where part_type = 'tool_use'
        and (record_id, call_id) in (select (call_record_id, call_id) from tool_calls_)
    qualify row_number() over (partition by record_id, call_id order by part_index) = 1
),

owners as (
    select * from record_owners
),

final as (
    select
        c.call_id,
        c.session_key,
        c.tool_name,
        c.status as call_status,
        c.call_record_id as record_id,
        c.result_record_id,
        c.input,
        c.result_native,
        r.seq,
        r.position,
        r.timestamp,
        r.native as record_native,
        u.part_index,
        -- the block's JSON, read from the line it was first seen in
        json_extract(l.json, u.native_path)::varchar as block,
        o.native_session_id,
        o.todo_agent,
    from tool_calls_ as c
    join records as r on r.record_id = c.call_record_id
    join tool_uses as u on u.record_id = c.call_record_id and u.call_id = c.call_id
    join classified as l on l.ord = u.source_ord
    join owners as o on o.record_id = c.call_record_id
)

select * from final
