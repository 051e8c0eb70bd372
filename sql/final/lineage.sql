-- lineage: one row per (stream, relation) with native evidence of another stream behind it.
-- spawned_by: the parent stream is the one whose records hold the spawning call (tool_calls),
-- else the stream that reported the agentId in a tool result or progress line. Its evidence is
-- native_field only when the sidecar's toolUseId and the parent's tool result naming the agentId
-- name the same call (registry entry, Lineage); native_field_partial with one of the two (or two
-- that disagree), progress_field with agent_progress lines only, content_match for an inline 1.0.x
-- sidechain matched by prompt text. A subagent of an Entire
-- checkpoint's tasks/<tool use id>/ folder is spawned by that call (evidence native_structure). A
-- Codex subagent thread is spawned by the call whose output (spawn_agent agent_id), end event
-- (collab_agent_spawn_end new_thread_id) or item (a paginated thread's CollabAgentToolCall
-- receiver_thread_ids) names it: native_field when the thread's own session_meta
-- names the session of that call as its parent thread, native_field_partial otherwise.
-- A call can be held by several streams (a fork or a forked Codex subagent copies its parent's
-- lines): the spawning call is the copy in the stream the child's own transcript names as its parent,
-- else in the one the evidence names; a Codex thread's call is never taken from another copy (a
-- sibling's or the child's own), so that its parent is then the thread its own session_meta names.
-- No stream is its own parent.
-- losses.sql declares the lineage loss for all but native_field.
-- forked_from (forkedFrom on copied records; a Codex forked_from_id) and inherits (fork-context-ref,
-- a Codex history_base: the parent's prefix is referenced, not copied) name the other session by its
-- ID; a Codex fork's cut in its parent is its session_meta's, kept in sessions.meta
-- (parent_ordinal_exclusive: forked_from_ordinal_exclusive, history_base.end_ordinal_exclusive).
-- continues: an Entire lifecycle event's previous_session_id (companion: reason other, evidence
-- native_field).
-- reads: lineage_evidence, session_streams, tool_calls
with evidence as (
    select * from lineage_evidence
),

streams as (
    -- a session with a transcript and lifecycle events has two rows there
    select distinct session_key, stream_kind from session_streams
),

parents as (
    select session_key, min(parent_session_id) as parent_session_id from session_streams group by session_key
),

-- a Codex fork's cut in its parent, as its first session_meta records it (reference codex-format.md §14.5)
codex_cuts as (
    select
        session_key,
        json_bigint(any_value(meta -> '$."com.openai.codex/session_meta".forked_from_ordinal_exclusive'))
            as forked_from_ordinal,
        json_bigint(any_value(meta -> '$."com.openai.codex/session_meta".history_base.end_ordinal_exclusive'))
            as history_base_ordinal,
    from session_streams
    where producer_source = 'codex-rollout-jsonl'
    group by session_key
),

calls as (
    select call_id, session_key, call_record_id from tool_calls
),

spawned as (
    select
        child_session_key as session_key,
        coalesce(
            arg_min(call_id, source) filter (where source in ('entire.tasks', 'sidecar.toolUseId')),
            min(call_id) filter (where source = 'tool_result.agentId'),
            min(call_id)
        ) as call_id,
        -- the entry's evidence: the sidecar's toolUseId and the parent's result naming the agentId,
        -- both naming one call
        count(distinct call_id) filter (
            where source in ('sidecar.toolUseId', 'tool_result.agentId')
        ) = 1 and bool_or(source = 'sidecar.toolUseId') and bool_or(source = 'tool_result.agentId')
            as has_entry_evidence,
        bool_or(source in ('sidecar.toolUseId', 'tool_result.agentId')) as has_one_entry_field,
        bool_or(source = 'progress.agentId') as has_progress,
        bool_or(source = 'entire.tasks') as has_structure,
        bool_or(source in (
            'spawn_agent.agent_id', 'collab_agent_spawn_end.new_thread_id', 'CollabAgentToolCall.receiver_thread_ids'
        )) as has_thread_call,
        min(parent_session_key) filter (where parent_session_key <> child_session_key) as reported_parent,
        min(role) as role,
        string_agg(distinct source, ',' order by source) as evidence_detail,
    from evidence
    where relation = 'spawned_by' and call_id is not null
    group by child_session_key
),

-- the copy of each child's spawning call: in the parent its own stream names, else in the one the
-- evidence names, else (not a Codex thread's) in another stream, never in the child itself
spawning_calls as (
    select p.session_key, c.session_key as call_session_key, c.call_record_id,
    from spawned as p
    left join parents as t using (session_key)
    join calls as c on c.call_id = p.call_id and c.session_key <> p.session_key
    where not p.has_thread_call or c.session_key in (t.parent_session_id, p.reported_parent)
    qualify row_number() over (
        partition by p.session_key
        order by coalesce(c.session_key = t.parent_session_id, false) desc,
            coalesce(c.session_key = p.reported_parent, false) desc, c.session_key
    ) = 1
),

spawned_edges as (
    select
        p.session_key,
        'spawned_by' as relation,
        coalesce(
            c.call_session_key,
            case when p.has_thread_call then nullif(t.parent_session_id, p.session_key) end,
            p.reported_parent
        ) as parent_session_key,
        p.call_id,
        c.call_record_id,
        s.stream_kind as scope,
        p.role,
        -- only the entry's two fields together are native_field; anything less says what it rests on
        case
            -- an Entire tasks/<tool use id>/ folder: the tree structure names the call
            when p.has_structure then 'native_structure'
            when p.has_entry_evidence then 'native_field'
            when p.has_thread_call and c.call_session_key = t.parent_session_id then 'native_field'
            when p.has_thread_call then 'native_field_partial'
            when p.has_one_entry_field then 'native_field_partial'
            when p.has_progress then 'progress_field'
            else 'content_match'
        end as evidence,
        p.evidence_detail,
        cast(null as varchar) as reason,
        cast(null as bigint) as parent_ordinal_exclusive,
    from spawned as p
    join streams as s using (session_key)
    left join parents as t using (session_key)
    left join spawning_calls as c using (session_key)
),

fork_edges as (
    select
        e.child_session_key as session_key,
        e.relation,
        min(e.parent_session_key) as parent_session_key,
        cast(null as varchar) as call_id,
        cast(null as varchar) as call_record_id,
        any_value(s.stream_kind) as scope,
        cast(null as varchar) as role,
        'native_field' as evidence,
        string_agg(distinct e.source, ',' order by e.source) as evidence_detail,
        -- Entire's previous_session_id does not say why the session continues another
        case when e.relation = 'continues' then 'other' end as reason,
        case
            when e.relation = 'forked_from' and bool_or(e.source = 'session_meta.forked_from_id')
                then any_value(c.forked_from_ordinal)
            when e.relation = 'inherits' and bool_or(e.source = 'session_meta.history_base')
                then any_value(c.history_base_ordinal)
        end as parent_ordinal_exclusive,
    from evidence as e
    join streams as s on s.session_key = e.child_session_key
    left join codex_cuts as c on c.session_key = e.child_session_key
    where e.relation in ('forked_from', 'inherits', 'continues') and e.parent_session_key <> e.child_session_key
    group by e.child_session_key, e.relation
),

final as (
    select * from spawned_edges
    union all
    select * from fork_edges
)

select * from final
order by session_key, relation
