-- record_owners: one row per record, with the stream identity that names Claude Code's todo
-- files and task lists (the native sessionId, and the agentId or inline sidechain of the stream).
-- Shared by plans.sql and plan_items.sql.
-- reads: records_full
with records as (
    select * from records_full
),

final as (
    select
        record_id,
        coalesce(native_session_id, split_part(session_key, '/', 1)) as native_session_id,
        coalesce(
            native_agent_id,
            nullif(regexp_extract(session_key, '/(sidechain-.*)$', 1), ''),
            native_session_id,
            split_part(session_key, '/', 1)
        ) as todo_agent,
    from records
)

select * from final
