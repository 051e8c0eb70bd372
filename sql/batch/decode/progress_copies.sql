-- progress_copies: one row per subagent message embedded in a parent's agent_progress line
-- (data.message) whose subagent transcript file is absent from the batch. These copies rebuild
-- the subagent stream (Entire's full.jsonl and older archives keep no subagent files); where the
-- file is present they stay native evidence on the progress records instead.
-- reads: batch_files, observations
with obs as (
    select * from observations
),

files as (
    select * from batch_files where not is_foreign
),

file_streams as (
    select distinct session_key from files
),

copies as (
    select
        coalesce(f.parent_session_id, f.session_id) || '/' || o.progress_agent_id as child_session_key,
        coalesce(f.parent_session_id, f.session_id) as parent_session_id,
        o.progress_agent_id as agent_id,
        o.source_file,
        o.file_idx,
        o.line,
        o.sub,
        json_merge_patch(
            o.json->'$.data.message',
            json_object(
                'sessionId', coalesce(f.parent_session_id, f.session_id),
                'agentId', o.progress_agent_id,
                'isSidechain', true
            )
        ) as json,
    from obs as o
    join files as f using (file_idx)
    where o.native_subtype = 'agent_progress'
        and o.progress_agent_id is not null
        and json_type(o.json->'$.data.message') = 'OBJECT'
),

final as (
    select * from copies
    where child_session_key not in (select session_key from file_streams)
)

select * from final
order by child_session_key, file_idx, line, sub
