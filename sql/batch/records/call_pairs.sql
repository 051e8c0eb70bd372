-- call_pairs: per tool call of a stream (session_key, call_id), the record of its call and of its
-- first result, from narrow columns alone (no block or line text).
-- tool_calls.sql reads its pairing here and the rows' own values in parts and records_full.
-- A model call is its session's first tool_use block with that id, its result the first tool_result
-- block, by (record_first_ord, ord, block_index): the order of (record_first_ord, part_index) for these
-- blocks, as part_index numbers a record's first-seen blocks by (ord, block_index), and the first of
-- a record's blocks with an id is first-seen (observations.sql keeps each line's tool block keys).
-- A user's `!` shell command is a record whose first block starts with <bash-input>, keyed by its
-- uuid; its result the first record (by record_first_ord) whose first block starts with
-- <bash-stdout> or <bash-stderr> and whose parent is that uuid (observations.sql, shell_head).
-- reads: classified, observation_index, record_table
with live as (
    select i.ord, i.record_id, i.record_first_ord, c.session_key, c.tool_blocks, c.has_blocks, c.shell_head,
    from observation_index as i
    join classified as c using (ord)
    where i.is_live and (c.tool_blocks is not null or c.has_blocks)
),

blocks as (
    select record_id, session_key, record_first_ord, ord, b.block_index, b.type, b.call_id, b.tool_name,
    from (select *, unnest(tool_blocks) as b from live where tool_blocks is not null)
),

model_calls as (
    select
        session_key, call_id, tool_name, 'model' as requested_by,
        record_id as call_record_id, record_first_ord as call_ord,
    from blocks
    where type = 'tool_use'
    qualify row_number() over (partition by session_key, call_id order by record_first_ord, ord, block_index) = 1
),

model_results as (
    select session_key, call_id, record_id as result_record_id, false as is_shell_result,
    from blocks
    where type = 'tool_result'
    qualify row_number() over (partition by session_key, call_id order by record_first_ord, ord, block_index) = 1
),

-- a record's first part is the first block of its first live line that has any
first_blocks as (
    select record_id, arg_min({'shell_head': shell_head}, ord).shell_head as shell_head,
    from live
    where has_blocks
    group by record_id
),

shell_records as (
    select r.record_id, r.session_key, r.record_first_ord, f.shell_head, c.uuid, c.parent_uuid,
    from first_blocks as f
    join record_table as r using (record_id)
    join classified as c on c.ord = r.first_ord
    where f.shell_head is not null
),

shell_calls as (
    select
        session_key, uuid as call_id, 'Bash' as tool_name, 'user' as requested_by,
        record_id as call_record_id, record_first_ord as call_ord,
    from shell_records
    where shell_head = 'input'
),

shell_results as (
    select i.session_key, i.call_id, o.record_id as result_record_id, true as is_shell_result,
    from shell_records as o
    join shell_calls as i on i.session_key = o.session_key and o.parent_uuid = i.call_id
    where o.shell_head = 'output'
    qualify row_number() over (partition by i.session_key, i.call_id order by o.record_first_ord) = 1
),

calls as (
    select * from model_calls
    union all
    select * from shell_calls
),

results as (
    select * from model_results
    union all
    select * from shell_results
),

final as (
    select c.*, r.result_record_id, r.is_shell_result,
    from calls as c
    left join results as r using (session_key, call_id)
)

select * from final
