-- unassigned_facts: one row per fact without established session ownership, for the manifest's
-- _meta["com.anthropic.claude-code/unassigned"] (registry entry, Lane and unassigned facts).
-- A summary line names the leaf it describes by leafUuid, and that leaf can belong to another
-- session (claude-code-format.md 4.4): unless the leaf is in the same stream, the title is not
-- this stream's. Its record stays in records (file accounting), but no title is derived from it.
-- Each batch lists its summary lines without a title (sql/batch/sessions/unowned_summaries.sql); a record
-- another batch derives a title from is not listed.
-- reads: session_events, unowned_summaries
with owned as (
    select record_id from session_events where native_type = 'summary'
),

final as (
    select
        'session_info' as kind,
        'title' as field,
        s.value,
        s.leaf_uuid,
        s.source_file,
        s.position,
    from unowned_summaries as s
    anti join owned as o using (record_id)
)

select * from final
order by source_file, position
