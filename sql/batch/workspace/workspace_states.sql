-- workspace_states: one row per workspace state change of a stream.
-- Registry entry, Workspace and VCS: environment.changes of workingDirectory ->
-- workspace_state.cwd; added working directories -> declaration.roots; isWorktree ->
-- workspace_state.worktree.linked. Records also carry cwd per line: the first cwd of a stream,
-- and each change between consecutive records, is a state. worktree-state lines are re-written
-- (registry "Repeated metadata"), so only a changed value is a state. A subagent sidecar's
-- worktreePath says the whole stream ran in a linked worktree.
-- Position basis (registry entry): "current-state rows without transcript positions form the
-- snapshot tail". A sidecar row is such a row: it is ordered after every transcript position of its
-- stream, with seq = the stream's last record seq + 1.
-- the record columns read below; the JSON text is kept for the environment, worktree-state
-- and relocated lines only (a cwd state reads its record's line by record_id)
-- reads: batch_files, records_full
with records as (
    select
        record_id, session_key, seq, timestamp, native_type, native_subtype, cwd, git_branch,
        case when native_type in ('attachment', 'worktree-state', 'relocated') then native end as native,
    from records_full
),

sidecars as (
    select session_key, sidecar
    from batch_files
    where json_extract_string(sidecar, '$.worktreePath') is not null
    qualify row_number() over (partition by session_key order by file_rank, file_idx) = 1
),

-- most streams keep one cwd throughout: their only cwd state is the first record with a cwd,
-- and only the records of streams with several cwds are compared with their predecessor
cwd_streams as (
    select
        session_key,
        min(cwd) <> max(cwd) as has_changes,
        arg_min(record_id, seq) as first_record_id,
        arg_min(cwd, seq) as first_cwd,
    from records
    where cwd is not null
    group by session_key
),

record_cwds as (
    select first_record_id as record_id, first_cwd as cwd, null::varchar as previous_cwd,
    from cwd_streams
    where not has_changes
    union all
    select
        record_id,
        cwd,
        lag(cwd) over (partition by session_key order by seq) as previous_cwd,
    from records
    where cwd is not null
        and session_key in (select session_key from cwd_streams where has_changes)
),

cwd_states as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        'record.cwd' as source,
        c.cwd,
        c.previous_cwd,
        null::varchar[] as roots,
        null::boolean as is_worktree_linked,
        null::varchar as worktree_path,
        r.git_branch,
        r.timestamp as recorded_at,
        r.native::json as native,
    from record_cwds as c
    join records_full as r using (record_id)
    where c.previous_cwd is null or c.cwd <> c.previous_cwd
),

environments as (
    select
        r.record_id,
        r.session_key,
        r.seq,
        r.timestamp,
        r.native -> '$.attachment' as attachment,
        e.part,
    from records as r
    cross join (values ('snapshot'), ('changes')) as e(part)
    where r.native_type = 'attachment' and r.native_subtype = 'environment'
        and json_type(r.native -> '$.attachment', '$.' || e.part) = 'OBJECT'
),

environment_states as (
    select
        record_id,
        session_key,
        seq,
        'environment.' || part as source,
        attachment -> ('$.' || part) ->> 'workingDirectory' as cwd,
        null::varchar as previous_cwd,
        case when json_type(attachment -> ('$.' || part), '$.additionalWorkingDirectories') = 'ARRAY'
            then json_extract_string(attachment -> ('$.' || part), '$.additionalWorkingDirectories[*]')
        end as roots,
        case when json_type(attachment -> ('$.' || part), '$.isWorktree') = 'BOOLEAN'
            then (attachment -> ('$.' || part) -> '$.isWorktree')::boolean
        end as is_worktree_linked,
        null::varchar as worktree_path,
        null::varchar as git_branch,
        timestamp as recorded_at,
        attachment::json as native,
    from environments
),

worktree_lines as (
    select
        *,
        json_type(native, '$.worktreeSession') as session_type,
        native -> '$.worktreeSession' as worktree_session,
        (native -> '$.worktreeSession')::varchar as value,
        lag((native -> '$.worktreeSession')::varchar) over (partition by session_key order by seq) as previous_value,
        row_number() over (partition by session_key order by seq) as line_index,
    from records
    where native_type = 'worktree-state'
),

worktree_states as (
    select
        record_id,
        session_key,
        seq,
        'worktree-state' as source,
        null::varchar as cwd,
        null::varchar as previous_cwd,
        null::varchar[] as roots,
        case session_type when 'OBJECT' then true when 'NULL' then false end as is_worktree_linked,
        worktree_session ->> 'worktreePath' as worktree_path,
        worktree_session ->> 'worktreeBranch' as git_branch,
        timestamp as recorded_at,
        native::json as native,
    from worktree_lines
    where line_index = 1 or previous_value is distinct from value
),

relocated_states as (
    select
        record_id,
        session_key,
        seq,
        'relocated' as source,
        native ->> 'relocatedCwd' as cwd,
        null::varchar as previous_cwd,
        null::varchar[] as roots,
        null::boolean as is_worktree_linked,
        null::varchar as worktree_path,
        null::varchar as git_branch,
        timestamp as recorded_at,
        native::json as native,
    from records
    where native_type = 'relocated'
),

last_seqs as (
    select session_key, max(seq) as last_seq from records group by session_key
),

sidecar_states as (
    select
        null::varchar as record_id,
        s.session_key,
        coalesce(l.last_seq, 0) + 1 as seq,
        'sidecar.worktreePath' as source,
        null::varchar as cwd,
        null::varchar as previous_cwd,
        null::varchar[] as roots,
        true as is_worktree_linked,
        json_extract_string(sidecar, '$.worktreePath') as worktree_path,
        null::varchar as git_branch,
        null::timestamptz as recorded_at,
        sidecar::json as native,
    from sidecars as s
    left join last_seqs as l using (session_key)
),

final as (
    select * from sidecar_states
    union all
    select * from cwd_states
    union all
    select * from environment_states
    union all
    select * from worktree_states
    union all
    select * from relocated_states
)

select * from final
order by session_key, seq, source
