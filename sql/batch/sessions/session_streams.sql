-- session_streams: one row per stream of the batch, before cross-batch lineage.
-- Titles: the latest custom-title beats the latest ai-title beats the newest summary whose
-- leafUuid is in the stream (summaries can name other sessions' leaves).
-- reads: batch_files, batch_lines, batch_source_lines, classified, observation_index, records_full

-- the key columns of the batch's observations (observation_keys.sql, narrowed to the columns
-- read here), joined once and shared by the file, sidechain, leaf and first-seen facts below
with obs as materialized (
    select
        c.file_idx, c.session_key, c.stream_kind, c.sidechain_root, c.uuid, c.cwd, c.git_branch, c.version,
        i.ord, i.is_live, i.record_id,
    from observation_index as i
    join classified as c using (ord)
),

-- the narrow record columns the facts below read; the JSON text is kept for the few
-- metadata lines only
recs as materialized (
    select
        session_key, seq, timestamp, entrypoint, copied_from_session_id, leaf_uuid, summary, custom_title, ai_title,
        native_type,
        case when native_type in ('last-prompt', 'fork-context-ref', 'continued-in') then native end as native,
    from records_full
),

files as (
    -- an empty or foreign file holds no stream
    select * from batch_files
    where not is_foreign
        and (file_idx in (select file_idx from batch_lines) or file_idx in (select file_idx from obs))
),

file_streams as (
    select
        session_key,
        any_value(session_id) as session_id,
        any_value(stream_kind) as stream_kind,
        any_value(parent_session_id) as parent_session_id,
        any_value(agent_id) as agent_id,
        -- a stream held by a file and by an Entire checkpoint: the values of the copy ranked first
        arg_min(content_level, file_rank) as content_level,
        any_value(producer_source) as producer_source,
        any_value(sidecar) as sidecar,
        any_value(record_source) as record_source,
        list(source_file order by file_rank) as source_files,
        arg_min(meta, file_rank) as meta,
    from files
    group by session_key
),

-- inline sidechains are streams without a file of their own
sidechain_streams as (
    select
        k.session_key,
        'sidechain-' || any_value(k.sidechain_root) as session_id,
        'sidechain' as stream_kind,
        any_value(f.session_id) as parent_session_id,
        cast(null as varchar) as agent_id,
        any_value(f.content_level) as content_level,
        any_value(f.producer_source) as producer_source,
        cast(null as varchar) as sidecar,
        any_value(f.record_source) as record_source,
        -- in the order of the main streams' files (the largest copy first), whatever the order of the rows
        list(f.source_file order by f.file_rank, f.source_file) as source_files,
        arg_min(f.meta, f.file_rank) as meta,
    from (select distinct session_key, file_idx, sidechain_root from obs where stream_kind = 'sidechain') as k
    join files as f using (file_idx)
    group by k.session_key
),

stream_files as (
    select * from file_streams
    union all
    select * from sidechain_streams
),

-- rows first: only the few records carrying a title or summary are matched against the
-- stream's uuids
title_lines as (
    select
        session_key,
        seq,
        custom_title,
        ai_title,
        summary,
        summary is not null
            and exists (select 1 from obs where obs.session_key = r.session_key and obs.uuid = r.leaf_uuid) as is_own_summary,
    from recs as r
    where custom_title is not null or ai_title is not null or summary is not null
),

titles as (
    select
        session_key,
        arg_max(custom_title, seq) filter (where custom_title is not null) as custom_title,
        arg_max(ai_title, seq) filter (where ai_title is not null) as ai_title,
        arg_max(summary, seq) filter (where is_own_summary) as summary,
    from title_lines
    group by session_key
),

-- header facts: the client (entrypoint), the active leaf (the latest last-prompt leafUuid),
-- fork and continuation references (registry entry, Lineage and tree).
-- The time span, record count and client are one pass over the records.
stats as (
    select
        session_key,
        min(timestamp) as started_at,
        max(timestamp) as ended_at,
        count(*) as record_count,
        arg_min(entrypoint, seq) filter (where entrypoint is not null) as client_name,
    from recs
    group by session_key
),

-- the session a copied transcript was forked from: only the copied records are counted
forks as (
    select session_key, mode(copied_from_session_id) as forked_from_session_id,
    from recs
    where copied_from_session_id is not null
    group by session_key
),

obs_stats as (
    select
        session_key,
        arg_min(cwd, ord) filter (where cwd is not null) as cwd,
        arg_min(git_branch, ord) filter (where git_branch <> '') as git_branch,
    from obs
    group by session_key
),

first_seen as (
    select
        session_key,
        list(cwd order by first_ord) filter (where cwd is not null) as cwds,
    from (select session_key, cwd, min(ord) as first_ord from obs group by all)
    group by session_key
),

versions as (
    select
        session_key,
        list(version order by first_ord) filter (where version is not null) as versions,
    from (select session_key, version, min(ord) as first_ord from obs group by all)
    group by session_key
),

-- the JSON of the few metadata lines is parsed after filtering them, not for every record
header_lines as (
    select
        session_key,
        arg_max(native->>'$.leafUuid', seq) filter (where native_type = 'last-prompt') as active_leaf_uuid,
        arg_max(native->>'$.parentSessionId', seq) filter (where native_type = 'fork-context-ref') as inherits_session_id,
        arg_max(native->>'$.parentLastUuid', seq) filter (where native_type = 'fork-context-ref') as inherits_last_uuid,
        arg_max(native->>'$.continuedInSessionId', seq) filter (where native_type = 'continued-in') as continued_in_session_id,
    from recs
    where native_type in ('last-prompt', 'fork-context-ref', 'continued-in')
    group by session_key
),

line_counts as (
    select session_key, count(*) as line_count
    from batch_source_lines
    group by session_key
),

final as (
    select
        sf.session_key,
        sf.session_id,
        sf.stream_kind,
        sf.parent_session_id,
        sf.agent_id,
        'claude-code' as agent,
        'converter' as producer_method,
        sf.producer_source,
        sf.content_level,
        s.started_at,
        s.ended_at,
        o.cwd,
        fs.cwds,
        o.git_branch,
        v.versions,
        coalesce(t.custom_title, t.ai_title, t.summary) as title,
        case
            when t.custom_title is not null then 'user'
            when t.ai_title is not null then 'model'
            when t.summary is not null then 'summary'
        end as title_source,
        json_extract_string(sf.sidecar, '$.agentType') as agent_type,
        json_extract_string(sf.sidecar, '$.description') as description,
        sf.source_files,
        case when sf.record_source <> 'transcript' then sf.record_source end as rebuilt_from,
        s.client_name,
        h.active_leaf_uuid,
        leaf.record_id as active_leaf_record_id,
        fk.forked_from_session_id,
        case when h.inherits_session_id is not null then 'referenced' end as inherits_mode,
        h.inherits_session_id,
        h.inherits_last_uuid,
        h.continued_in_session_id,
        coalesce(s.record_count, 0) as record_count,
        coalesce(lc.line_count, 0) as line_count,
        sf.sidecar,
        sf.meta,
    from stream_files as sf
    left join stats as s using (session_key)
    left join titles as t using (session_key)
    left join obs_stats as o using (session_key)
    left join first_seen as fs using (session_key)
    left join versions as v using (session_key)
    left join line_counts as lc using (session_key)
    left join forks as fk using (session_key)
    left join header_lines as h using (session_key)
    left join (select session_key, uuid, record_id from obs where is_live and uuid is not null) as leaf
        on leaf.session_key = sf.session_key and leaf.uuid = h.active_leaf_uuid
)

select * from final
order by session_key
