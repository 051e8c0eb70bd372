-- session_events: one row per change of a session-level value (session_info or config_change).
-- Claude Code re-writes titles, last-prompt, mode and permission-mode lines at every turn or
-- exit; a repeated identical value is not a change (registry entry, Repeated metadata).
-- permission-mode lines and the permissionMode of prompts form one sequence. A last-prompt value is its
-- text and its leafUuid (the active leaf): 2.1.199 writes the leaf alone, so a new leaf is a change.
-- rows first: the metadata lines and the prompts carrying a permissionMode
-- reads: classified, observation_index, records_full
with records as (
    select record_id, session_key, seq, native_type, native, permission_mode
    from records_full
    where native_type in (
            'ai-title', 'custom-title', 'agent-name', 'tag', 'last-prompt', 'pr-link', 'continued-in',
            'worktree-state', 'permission-mode', 'mode', 'summary'
        )
        or (native_type = 'user' and permission_mode is not null)
),

-- the stream's uuids that a summary names as its leaf
stream_uuids as (
    select distinct c.session_key, c.uuid
    from observation_index as i
    join classified as c using (ord)
    where c.uuid in (select native->>'$.leafUuid' from records where native_type = 'summary')
),

facts as (
    select
        r.record_id, r.session_key, r.seq, r.native_type, r.native,
        case r.native_type
            when 'ai-title' then 'title'
            when 'custom-title' then 'title'
            when 'summary' then 'title'
            when 'agent-name' then 'agent_name'
            when 'tag' then 'tag'
            when 'last-prompt' then 'last_prompt'
            when 'pr-link' then 'pr_link'
            when 'continued-in' then 'continued_in'
            when 'worktree-state' then 'worktree'
            when 'permission-mode' then 'permission_mode'
            when 'mode' then 'mode'
            when 'user' then 'permission_mode'
        end as field,
        case r.native_type
            when 'ai-title' then r.native->>'$.aiTitle'
            when 'custom-title' then r.native->>'$.customTitle'
            when 'summary' then r.native->>'$.summary'
            when 'agent-name' then r.native->>'$.agentName'
            when 'tag' then r.native->>'$.tag'
            when 'last-prompt' then r.native->>'$.lastPrompt'
            when 'pr-link' then r.native->>'$.prUrl'
            when 'continued-in' then r.native->>'$.continuedInSessionId'
            when 'worktree-state' then r.native->>'$.worktreeSession.worktreePath'
            when 'permission-mode' then r.native->>'$.permissionMode'
            when 'mode' then r.native->>'$.mode'
            when 'user' then r.permission_mode
        end as value,
        case r.native_type
            when 'ai-title' then 'model'
            when 'custom-title' then 'user'
            when 'summary' then 'summary'
        end as title_source,
        r.native->>'$.leafUuid' as leaf_uuid,
    from records as r
    -- a summary names the leaf it describes, which can be in another session: only a summary
    -- of this stream's own leaf is a title of this stream (the others are unassigned facts)
    left join stream_uuids as u on u.session_key = r.session_key and u.uuid = r.native->>'$.leafUuid'
    where r.native_type in (
            'ai-title', 'custom-title', 'agent-name', 'tag', 'last-prompt', 'pr-link', 'continued-in',
            'worktree-state', 'permission-mode', 'mode'
        )
        or (r.native_type = 'summary' and u.uuid is not null)
        or (r.native_type = 'user' and r.permission_mode is not null)
),

changes as (
    select
        *,
        lag(value) over (partition by session_key, field order by seq) as previous_value,
        lag(title_source) over (partition by session_key, field order by seq) as previous_source,
        lag(leaf_uuid) over (partition by session_key, field order by seq) as previous_leaf_uuid,
        row_number() over (partition by session_key, field order by seq) = 1 as is_first,
    from facts
),

final as (
    select
        record_id,
        session_key,
        seq,
        case when field in ('permission_mode', 'mode') then 'config_change' else 'session_info' end as event_kind,
        field,
        value,
        previous_value,
        title_source,
        leaf_uuid,
        native_type,
        native,
    from changes
    where is_first
        or value is distinct from previous_value
        or title_source is distinct from previous_source
        or (field = 'last_prompt' and leaf_uuid is distinct from previous_leaf_uuid)
)

select * from final
order by session_key, seq
