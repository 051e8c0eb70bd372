-- absent_files: one row per file a record refers to that the archive does not hold, for the
-- manifest's export_report.retention. Registry entry, Notes: large tool outputs live in separate
-- files that may be deleted under the retention policy, and transcripts are deleted after 30 days by
-- default, "which bundle manifests record as deleted_by_retention". A transcript archive holds no
-- record of a deletion: an absent file may have been removed by the cleanup, by hand, or never
-- copied. So a row says the file is absent and names deleted_by_retention as one possible cause;
-- it never claims it (see docs/asr-tables.md, Manifest).
-- reads: lineage_evidence, parts, records, sessions
with records as (
    select record_id, session_key, source_file, position from records
),

-- tool outputs persisted to tool-results/<file> whose file is not in the archive
tool_outputs as (
    select distinct
        'tool_result_file' as file_kind,
        p.persisted_file as name,
        p.session_key,
        r.source_file,
        r.position,
    from parts as p
    join records as r using (record_id)
    where p.capture_state = 'truncated'
),

-- subagent transcripts named by a parent's tool result or progress line (agentId) but not in the archive:
-- rebuilt from agent_progress copies, or with no stream at all
named_agents as (
    select
        e.child_session_key,
        min(e.parent_session_key) as session_key,
        string_agg(distinct e.source, ',' order by e.source) as named_by,
    from lineage_evidence as e
    where e.relation = 'spawned_by' and e.source in ('tool_result.agentId', 'progress.agentId')
    group by e.child_session_key
),

subagent_transcripts as (
    select
        'subagent_transcript' as file_kind,
        'agent-' || split_part(a.child_session_key, '/', 2) || '.jsonl' as name,
        a.session_key,
        cast(null as varchar) as source_file,
        cast(null as varchar) as position,
    from named_agents as a
    left join sessions as s on s.session_key = a.child_session_key
    where s.session_key is null or s.rebuilt_from is not null
),

final as (
    select * from tool_outputs
    union all
    select * from subagent_transcripts
)

select * from final
order by file_kind, session_key, name
