-- plan_items: one row per item of an items plan row of sql/batch/plans/plans.sql, in native order.
-- Registry entry, Plans: TodoWrite → planType: items; Task tools → planType: items with entryId,
-- owner and blockedBy. The plan rows are derived as in sql/batch/plans/plans.sql (same sources, same todo
-- snapshot rule); TaskCreate and TaskUpdate touch one entry and state only the fields they set.
-- reads: plan_calls, record_owners, records_full, todo_snapshots
with owners as (
    select * from record_owners
),

-- the plan calls, bound and computed once for the CTEs below that read them
calls as materialized (
    select * from plan_calls
),

todo_writes as (
    select
        *,
        case
            when json_type(input, '$.todos') = 'ARRAY' then input -> '$.todos'
            when json_type(result_native, '$.newTodos') = 'ARRAY' then result_native -> '$.newTodos'
        end as todos,
    from calls
    where tool_name = 'TodoWrite'
),

todo_states as (
    select record_id, session_key, call_id, seq, part_index, todos, 'tool_call' as plan_source,
    from todo_writes
    where todos is not null
    union all
    select record_id, session_key, null as call_id, seq, -1 as part_index, todos, 'todos_snapshot' as plan_source,
    from todo_snapshots
),

todo_state_texts as (
    select
        *,
        json_transform(todos, '[{"id": "VARCHAR", "content": "VARCHAR", "status": "VARCHAR",
            "activeForm": "VARCHAR", "priority": "VARCHAR"}]')::varchar as state,
    from todo_states
),

todo_changes as (
    select
        *,
        coalesce(lag(state) over (partition by session_key order by seq, part_index), '[]') as previous_state,
    from todo_state_texts
),

-- Item lists: (plan row, JSON array of items).
item_lists as (
    select
        record_id, session_key, call_id, seq, part_index,
        'todos:' || native_session_id || '-agent-' || todo_agent as plan_id,
        todos as items,
    from todo_writes
    where todos is not null
    union all
    select
        s.record_id, s.session_key, null as call_id, s.seq, -1 as part_index,
        'todos:' || s.native_session_id || '-agent-' || s.todo_agent as plan_id,
        s.todos as items,
    from todo_snapshots as s
    join todo_changes as c on c.record_id = s.record_id and c.plan_source = 'todos_snapshot'
    where c.state is distinct from c.previous_state
    union all
    select
        record_id, session_key, call_id, seq, part_index,
        'tasks:' || native_session_id as plan_id,
        result_native -> '$.tasks' as items,
    from calls
    where tool_name = 'TaskList' and json_type(result_native, '$.tasks') = 'ARRAY'
    union all
    select
        r.record_id, r.session_key, null as call_id, r.seq, -1 as part_index,
        'tasks:' || o.native_session_id as plan_id,
        r.native -> '$.attachment.content' as items,
    from records_full as r
    join owners as o using (record_id)
    where r.native_type = 'attachment'
        and r.native_subtype = 'task_reminder'
        and json_type(r.native, '$.attachment.content') = 'ARRAY'
),

listed_items as (
    select
        record_id, session_key, call_id, seq, part_index, plan_id,
        unnest(json_extract(items, '$[*]')) as item,
        unnest(range(json_array_length(items)::bigint)) as item_index,
        null as entry_id_override,
        null as previous_status,
    from item_lists
),

-- Single-entry task calls: TaskCreate (input + the id in the result), TaskUpdate (input), TaskGet (result).
single_items as (
    select
        record_id, session_key, call_id, seq, part_index,
        'tasks:' || native_session_id as plan_id,
        case when tool_name = 'TaskGet' then result_native -> '$.task' else input end as item,
        0 as item_index,
        case
            when tool_name = 'TaskCreate' then result_native ->> '$.task.id'
            when tool_name = 'TaskUpdate' then coalesce(input ->> '$.taskId', result_native ->> '$.taskId')
        end as entry_id_override,
        case when tool_name = 'TaskUpdate' then result_native ->> '$.statusChange.from' end as previous_status,
    from calls
    where tool_name in ('TaskCreate', 'TaskUpdate')
        or (tool_name = 'TaskGet' and json_type(result_native, '$.task') = 'OBJECT')
),

all_items as (
    select * from listed_items
    union all
    select * from single_items
),

decoded as (
    select
        *,
        json_transform(item, '{
            "id": "VARCHAR", "taskId": "VARCHAR", "content": "VARCHAR", "subject": "VARCHAR",
            "description": "VARCHAR", "status": "VARCHAR", "activeForm": "VARCHAR", "priority": "VARCHAR",
            "owner": "VARCHAR", "blockedBy": ["VARCHAR"], "blocks": ["VARCHAR"],
            "addBlockedBy": ["VARCHAR"], "addBlocks": ["VARCHAR"]
        }') as t,
    from all_items
),

final as (
    select
        record_id,
        session_key,
        call_id,
        plan_id,
        item_index::bigint as item_index,
        coalesce(entry_id_override, t.id, t.taskId) as entry_id,
        coalesce(t.content, t.subject) as content,
        t.description,
        t.status,
        previous_status,
        t.activeForm as active_form,
        t.priority,
        t.owner,
        coalesce(t.blockedBy, t.addBlockedBy) as blocked_by,
        coalesce(t.blocks, t.addBlocks) as blocks,
        item::varchar as native,
        seq,
        part_index,
    from decoded
)

select * exclude (seq, part_index) from final
order by session_key, seq, part_index, item_index
