-- result_calls: one row per record holding a tool result, with the call_id of its first
-- tool_result block (the call the result answers). Shared by file_changes.sql and vcs_events.sql.
-- reads: batch_parts
with results as (
    select record_id, call_id, part_index
    from batch_parts
    where part_type = 'tool_result' and call_id is not null
),

final as (
    select record_id, call_id
    from results
    qualify row_number() over (partition by record_id order by part_index) = 1
)

select * from final
