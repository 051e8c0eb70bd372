-- lineage: one row per subagent with evidence of the call that spawned it.
-- The parent stream is the one whose records hold the call (tool_calls), else the stream that
-- reported the agentId in a tool result or progress line.
with evidence as (
    select * from lineage_evidence
),

streams as (
    select session_key, stream_kind from session_streams
),

calls as (
    select call_id, session_key, call_record_id
    from tool_calls
    qualify row_number() over (partition by call_id order by session_key) = 1
),

per_child as (
    select
        child_session_key as session_key,
        coalesce(
            arg_min(call_id, source) filter (where source = 'sidecar.toolUseId'),
            min(call_id)
        ) as call_id,
        min(parent_session_key) as reported_parent,
        min(role) as role,
        string_agg(distinct source, ',' order by source) as evidence_detail,
    from evidence
    where call_id is not null
    group by child_session_key
),

final as (
    select
        p.session_key,
        'spawned_by' as relation,
        coalesce(c.session_key, p.reported_parent) as parent_session_key,
        p.call_id,
        c.call_record_id,
        s.stream_kind as scope,
        p.role,
        case when p.evidence_detail = 'tool_use.prompt' then 'content_match' else 'native_field' end as evidence,
        p.evidence_detail,
    from per_child as p
    join streams as s using (session_key)
    left join calls as c using (call_id)
)

select * from final
order by session_key
