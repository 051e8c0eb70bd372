-- unowned_summaries: one row per summary line of the batch from which no title is derived (no
-- session_events row is of its record: the leaf it names is in another stream), with the title
-- and the leaf it names, for the final stage's unassigned_facts. Selected here, where the lines'
-- text is at hand: in the final stage it took reading every part's records.native again
-- (docs/performance.md, "Incremental re-runs").
-- reads: records_full, session_events
-- order: source_file, position
with summaries as (
    select record_id, session_key, native, source_file, position
    from records_full
    where native_type = 'summary'
),

owned as (
    select record_id from session_events where native_type = 'summary'
),

final as (
    select
        s.record_id,
        s.session_key,
        s.native->>'$.summary' as value,
        s.native->>'$.leafUuid' as leaf_uuid,
        s.source_file,
        s.position,
    from summaries as s
    anti join owned as o using (record_id)
)

select * from final
