-- sessions: one row per stream, with its parent stream resolved across batches and the root of its tree.
-- reads: background_tasks, first_prompts, lineage, session_streams
-- parent_session_key: a subagent's or sidechain's parent is the stream that spawned it (lineage
-- spawned_by), else the session its own transcript names (parent_session_id), whether or not that
-- stream is in the output; a main session has none (a fork, a resumed or continued session is a main
-- session of its own: lineage says what it came from). No stream is its own parent.
-- root_session_key: parent_session_key followed up to a stream without a parent, or to a parent
-- that is not in the output (docs/asr-tables.md, "Roots"); a chain that comes back to a stream it
-- passed stops before it.
with recursive all_streams as (
    select * from session_streams
),

-- Entire lifecycle events (formats/entire_events.py): a row per (events file, session), joined here
-- to the session's transcript row when there is one: SessionStart sets started_at, the event
-- records and lines count with the transcript's; a session with events only is a row of its own
event_rows as (
    select
        session_key,
        min(started_at) as started_at,
        max(ended_at) as ended_at,
        cast(sum(record_count) as bigint) as record_count,
        cast(sum(line_count) as bigint) as line_count,
        flatten(list(source_files order by source_files)) as source_files,
    from all_streams
    where producer_source = 'entire-agent-events'
    group by session_key
),

transcript_rows as (
    select * from all_streams where producer_source is distinct from 'entire-agent-events'
),

streams as (
    select
        t.* replace (
            coalesce(e.started_at, t.started_at) as started_at,
            greatest(t.ended_at, e.ended_at) as ended_at,
            t.record_count + coalesce(e.record_count, 0) as record_count,
            t.line_count + coalesce(e.line_count, 0) as line_count,
            list_concat(t.source_files, coalesce(e.source_files, [])) as source_files
        ),
    from transcript_rows as t
    left join event_rows as e using (session_key)
    union all by name
    select
        r.* replace (
            e.started_at as started_at, e.ended_at as ended_at, e.record_count as record_count,
            e.line_count as line_count, e.source_files as source_files
        ),
    from all_streams as r
    join event_rows as e using (session_key)
    where r.producer_source = 'entire-agent-events'
        and r.session_key not in (select session_key from transcript_rows)
    qualify row_number() over (partition by r.session_key order by r.source_files) = 1
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

parents as (
    select
        s.session_key,
        nullif(
            coalesce(sp.parent_session_key, case when s.stream_kind <> 'main' then s.parent_session_id end),
            s.session_key
        ) as parent_session_key,
    from streams as s
    left join spawned as sp using (session_key)
),

-- each stream with every ancestor, the path walked to it (itself first)
ancestors (session_key, ancestor_key, path) as (
    select session_key, session_key, [session_key] from parents
    union all
    select a.session_key, p.parent_session_key, list_append(a.path, p.parent_session_key)
    from ancestors as a
    join parents as p on p.session_key = a.ancestor_key
    where p.parent_session_key is not null and not list_contains(a.path, p.parent_session_key)
),

roots as (
    select session_key, arg_max(ancestor_key, len(path)) as root_session_key from ancestors group by session_key
),

-- a stream whose rows span several batches (re-run as deltas) has its first prompt in the earliest
prompts as (
    select session_key, text as first_prompt, record_id as first_prompt_record_id
    from first_prompts
    qualify row_number() over (partition by session_key order by seq, record_id) = 1
),

final as (
    select
        s.session_key,
        s.session_id,
        s.stream_kind,
        pa.parent_session_key,
        r.root_session_key,
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
        fp.first_prompt,
        fp.first_prompt_record_id,
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
    join parents as pa using (session_key)
    join roots as r using (session_key)
    left join prompts as fp using (session_key)
    left join async_agents as aa on aa.agent_id = s.agent_id and aa.parent_key = pa.parent_session_key
)

select * from final
order by session_key
