-- sessions: one row per stream, with its parent stream resolved across batches.
-- reads: background_tasks, lineage, session_streams
with streams as (
    select * from session_streams
),

spawned as (
    select session_key, parent_session_key from lineage where relation = 'spawned_by'
),

-- a subagent launched in the background (Agent with run_in_background) is async
async_agents as (
    select distinct session_key as parent_key, agent_id
    from background_tasks
    where task_kind = 'subagent' and is_async and agent_id is not null
),

main_keys as (
    select session_key from streams where stream_kind = 'main'
),

final as (
    select
        s.session_key,
        s.session_id,
        s.stream_kind,
        coalesce(sp.parent_session_key, m.session_key) as parent_session_key,
        s.parent_session_id,
        s.agent_id,
        s.agent,
        s.producer_method,
        s.producer_source,
        s.content_level,
        s.started_at,
        s.ended_at,
        s.cwd,
        s.cwds,
        s.git_branch,
        s.versions,
        s.title,
        s.title_source,
        s.agent_type,
        case when s.stream_kind = 'subagent' then aa.agent_id is not null end as is_async,
        s.description,
        s.source_files,
        s.rebuilt_from,
        s.client_name,
        s.active_leaf_uuid,
        s.active_leaf_record_id,
        s.forked_from_session_id,
        s.inherits_mode,
        s.inherits_session_id,
        s.inherits_last_uuid,
        s.continued_in_session_id,
        s.record_count,
        s.line_count,
        s.sidecar,
        s.meta,
    from streams as s
    left join spawned as sp using (session_key)
    left join main_keys as m on s.stream_kind <> 'main' and m.session_key = s.parent_session_id
    left join async_agents as aa
        on aa.agent_id = s.agent_id and aa.parent_key = coalesce(sp.parent_session_key, m.session_key)
)

select * from final
order by session_key
