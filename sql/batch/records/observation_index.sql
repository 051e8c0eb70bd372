-- observation_index: one row per observation (keyed by ord), with the record it goes into and its
-- line status. It reads narrow columns of the observations (`classified`): no JSON text, which is
-- joined back by ord where it is read (observation_keys.sql); its hash (json_hash) was taken where
-- the line was decoded (observations.sql).
-- Position basis (registry entry): keep the latest observation of each repeated uuid at the
-- position where that uuid first appeared; then fold the responses sharing message.id.
-- A compact summary (isCompactSummary) folds into its compact_boundary: one compaction (ASR-373).
-- Repeated metadata (ai-title, last-prompt, mode, permission-mode, ...) is re-written at each
-- turn or exit: a line repeating the previous value of its type is not a change, so it folds
-- into the record of the line that set the value (registry entry, Repeated metadata).
-- `ord` is the observation's position in the batch (file_rank, file_idx, line, sub nulls first),
-- numbered from 1 by the converter (batch/formats/claude_code/converter.py): unique, and the key by which
-- every statement joins an observation's columns.
-- reads: classified
with ordered as (
    select
        ord, file_idx, file_rank, line, sub, session_key, position, native_type, native_subtype, uuid,
        parent_uuid, message_id, is_compact_summary, permission_mode, json_hash,
        repeatable_metadata(uuid, native_type) as is_repeatable,
    from classified
),

-- The windows below run on the few rows they concern: repeatable metadata lines, and the
-- sequence of permission-mode lines and prompts carrying a permissionMode.
-- The permission mode is one sequence of permission-mode lines and prompts' permissionMode: each
-- value is compared with the session's current value, whichever line set it. A line also changes
-- it back after a prompt set another mode; a line repeating the mode a prompt has just set is no
-- change, and folds into that prompt's record.
permission_sequence as (
    select
        session_key,
        ord,
        native_type,
        coalesce(uuid, position) as own_key,
        permission_mode is distinct from lag(permission_mode) over (partition by session_key order by ord)
            as is_mode_change,
    from ordered
    where native_type = 'permission-mode' or (native_type = 'user' and permission_mode is not null)
),

permission_setters as (
    select
        ord,
        is_mode_change,
        -- a permission-mode line repeating the mode a prompt set: the prompt's record key
        case
            when native_type = 'permission-mode' and not is_mode_change
                and last_value(case when is_mode_change then native_type end ignore nulls) over w = 'user'
            then last_value(case when is_mode_change then own_key end ignore nulls) over w
        end as prompt_key,
    from permission_sequence
    window w as (partition by session_key order by ord rows between unbounded preceding and current row)
),

changes as (
    select
        o.session_key,
        o.native_type,
        o.position,
        o.ord,
        case
            when o.native_type = 'permission-mode' then p.is_mode_change::int
            when o.json_hash is distinct from lag(o.json_hash) over (
                partition by o.session_key, o.native_type order by o.ord
            ) then 1
            else 0
        end as is_change,
    from ordered as o
    left join permission_setters as p using (ord)
    -- a line folding into a prompt is no member of a run of lines
    where o.is_repeatable and p.prompt_key is null
),

runs as (
    select *, sum(is_change) over (partition by session_key, native_type order by ord) as run_no,
    from changes
),

-- a run of lines repeating one value is keyed by the position of the line that set it
repeatable_keys as (
    select
        ord,
        first_value(position) over (partition by session_key, native_type, run_no order by ord) as run_key,
    from runs
),

obs as (
    select
        o.*,
        coalesce(r.run_key, o.uuid, o.position) as uuid_key,
        p.prompt_key,
    from ordered as o
    left join repeatable_keys as r using (ord)
    left join permission_setters as p using (ord)
),

uuid_groups as (
    select
        session_key,
        uuid_key,
        min(ord) as uuid_first_ord,
        max(ord) as uuid_last_ord,
        count(distinct json_hash) as uuid_versions,
        arg_min(position, ord) as uuid_first_position,
        arg_min(line, ord) as uuid_first_line,
    from obs
    group by all
),

boundaries as (
    select distinct
        session_key,
        uuid as boundary_uuid,
    from obs
    where native_subtype = 'compact_boundary' and uuid is not null
),

keyed as (
    select
        o.*,
        g.uuid_first_ord,
        g.uuid_versions,
        g.uuid_first_position,
        g.uuid_first_line,
        -- identical copies: the first is kept; overwritten snapshots: the latest, at the first position
        o.ord = case when g.uuid_versions = 1 then g.uuid_first_ord else g.uuid_last_ord end
            and o.prompt_key is null as is_live,
        case
            when o.prompt_key is not null then o.prompt_key
            when o.native_type = 'assistant' and o.message_id is not null then 'msg:' || o.message_id
            when b.boundary_uuid is not null then b.boundary_uuid
            else o.uuid_key
        end as record_key,
    from obs as o
    join uuid_groups as g using (session_key, uuid_key)
    left join boundaries as b
        on b.session_key = o.session_key
        and b.boundary_uuid = o.parent_uuid
        and o.is_compact_summary
),

per_record as (
    select
        session_key,
        record_key,
        min(uuid_first_ord) filter (where is_live) as record_first_ord,
        max(ord) filter (where is_live) as record_last_ord,
        count(*) as observation_count,
        count(*) filter (where is_live) as live_count,
        bool_or(uuid_versions > 1) as has_revision_history,
    from keyed
    group by all
),

final as (
    select
        k.*,
        r.record_first_ord,
        r.record_last_ord,
        r.observation_count,
        r.live_count,
        r.has_revision_history,
        k.session_key || ':' || k.record_key as record_id,
        k.is_live and k.ord = r.record_last_ord as is_representative,
        case
            when not k.is_live then 'duplicate'
            when k.sub is not null then 'recovered'
            when k.ord = r.record_last_ord then 'mapped'
            else 'folded'
        end as status,
        case
            when not k.is_live and k.is_repeatable then 'unchanged_value'
            when not k.is_live and k.uuid_versions > 1 then 'overwritten_snapshot'
            when not k.is_live then 'identical_copy'
            when k.sub is not null then 'concatenated_objects'
        end as reason,
    from keyed as k
    join per_record as r using (session_key, record_key)
)

select
    ord, is_repeatable, uuid_key, uuid_first_ord, uuid_versions, uuid_first_position,
    uuid_first_line, is_live, record_key, record_first_ord, record_last_ord, observation_count,
    live_count, has_revision_history, record_id, is_representative, status, reason,
from final
