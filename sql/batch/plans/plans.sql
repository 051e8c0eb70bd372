-- plans: one row per plan version or plan operation: a plan tool call (call_id), a task_reminder
-- attachment, or a user-line todos snapshot that changes the stream's todo state.
-- Registry entry, Plans: ExitPlanMode input plan → plan with planType: document, planId from the
-- plan file name, source the plan file. TodoWrite → planType: items. Task tools → planType: items
-- with entryId, owner and blockedBy. The items themselves are built by sql/batch/plans/plan_items.sql from the
-- same calls (sql/batch/plans/plan_calls.sql), todos snapshots (sql/batch/plans/todo_snapshots.sql) and stream owners
-- (sql/batch/records/record_owners.sql).
-- reads: plan_calls, record_owners, records_full, todo_snapshots
with owners as (
    select * from record_owners
),

-- the plan calls, bound and computed once for the CTEs below that read them
calls as materialized (
    select * from plan_calls
),

documents as (
    select
        *,
        coalesce(
            result_native ->> '$.filePath', input ->> '$.planFilePath', input ->> '$.filePath'
        ) as plan_file,
    from calls
    where tool_name = 'ExitPlanMode'
),

document_plans as (
    select
        record_id,
        session_key,
        call_id,
        tool_name,
        'tool_call' as plan_source,
        coalesce(
            nullif(regexp_extract(plan_file, '([^/\\]+?)(\.[^./\\]*)?$', 1), ''),
            record_native ->> '$.slug',
            call_id
        ) as plan_id,
        'document' as plan_type,
        'replace' as op,
        plan_file as source,
        coalesce(input ->> '$.plan', result_native ->> '$.plan') as content,
        null::bigint as item_count,
        call_status,
        result_record_id,
        seq,
        part_index,
        position,
        timestamp,
        result_native,
        block as native,
    from documents
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

-- Every todo state of a stream in file order; a snapshot repeating the previous state is no change.
todo_states as (
    select
        record_id, session_key, call_id, seq, part_index, todos, native_session_id, todo_agent,
        'tool_call' as plan_source,
    from todo_writes
    where todos is not null
    union all
    select
        record_id, session_key, null as call_id, seq, -1 as part_index, todos, native_session_id, todo_agent,
        'todos_snapshot' as plan_source,
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

todo_plans as (
    select
        w.record_id,
        w.session_key,
        w.call_id,
        w.tool_name,
        'tool_call' as plan_source,
        'todos:' || w.native_session_id || '-agent-' || w.todo_agent as plan_id,
        'items' as plan_type,
        'replace' as op,
        null as source,
        null as content,
        json_array_length(w.todos)::bigint as item_count,
        w.call_status,
        w.result_record_id,
        w.seq,
        w.part_index,
        w.position,
        w.timestamp,
        w.result_native,
        w.block as native,
    from todo_writes as w
    union all
    select
        s.record_id,
        s.session_key,
        null as call_id,
        null as tool_name,
        'todos_snapshot' as plan_source,
        'todos:' || s.native_session_id || '-agent-' || s.todo_agent as plan_id,
        'items' as plan_type,
        'snapshot' as op,
        null as source,
        null as content,
        json_array_length(s.todos)::bigint as item_count,
        null as call_status,
        null as result_record_id,
        s.seq,
        -1 as part_index,
        s.position,
        s.timestamp,
        null as result_native,
        s.todos as native,
    from todo_snapshots as s
    join todo_changes as c
        on c.record_id = s.record_id and c.plan_source = 'todos_snapshot'
    where c.state is distinct from c.previous_state
),

task_plans as (
    select
        record_id,
        session_key,
        call_id,
        tool_name,
        'tool_call' as plan_source,
        'tasks:' || native_session_id as plan_id,
        'items' as plan_type,
        case tool_name
            when 'TaskCreate' then 'create'
            when 'TaskUpdate' then 'update'
            when 'TaskList' then 'snapshot'
            when 'TaskGet' then 'read'
        end as op,
        null as source,
        null as content,
        case tool_name
            when 'TaskList' then coalesce(json_array_length(result_native, '$.tasks'), 0)
            when 'TaskGet' then case when json_type(result_native, '$.task') = 'OBJECT' then 1 else 0 end
            else 1
        end::bigint as item_count,
        call_status,
        result_record_id,
        seq,
        part_index,
        position,
        timestamp,
        result_native,
        block as native,
    from calls
    where tool_name in ('TaskCreate', 'TaskUpdate', 'TaskList', 'TaskGet')
),

reminder_plans as (
    select
        r.record_id,
        r.session_key,
        null as call_id,
        null as tool_name,
        'task_reminder' as plan_source,
        'tasks:' || o.native_session_id as plan_id,
        'items' as plan_type,
        'snapshot' as op,
        null as source,
        null as content,
        coalesce(json_array_length(r.native, '$.attachment.content'), 0)::bigint as item_count,
        null as call_status,
        null as result_record_id,
        r.seq,
        -1 as part_index,
        r.position,
        r.timestamp,
        null as result_native,
        r.native -> '$.attachment' as native,
    from records_full as r
    join owners as o using (record_id)
    where r.native_type = 'attachment' and r.native_subtype = 'task_reminder'
),

unioned as (
    select * from document_plans
    union all
    select * from todo_plans
    union all
    select * from task_plans
    union all
    select * from reminder_plans
),

final as (
    select
        record_id,
        session_key,
        call_id,
        tool_name,
        plan_source,
        plan_id,
        plan_type,
        op,
        source,
        content,
        item_count,
        call_status,
        result_record_id,
        position,
        timestamp as recorded_at,
        result_native::varchar as result_native,
        native::varchar as native,
        seq,
        part_index,
    from unioned
)

select * exclude (seq, part_index) from final
order by session_key, seq, part_index
