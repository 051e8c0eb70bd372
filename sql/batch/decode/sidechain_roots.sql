-- sidechain_roots: one row per inline sidechain object (1.0.x isSidechain lines inside a main
-- transcript), with the uuid of the sidechain's first line. Each root starts its own stream.
-- The walk follows parentUuid between sidechain lines; `union` (not `union all`) stops on cycles.
-- reads: observations
with recursive sidechain as (
    select file_idx, line, sub, uuid, parent_uuid
    from observations
    where is_sidechain and stream_kind = 'main' and native_agent_id is null and uuid is not null
),

roots as (
    select s.uuid, s.uuid as root_uuid
    from sidechain as s
    left join sidechain as p on p.uuid = s.parent_uuid
    where p.uuid is null
),

walk(uuid, root_uuid) as (
    select uuid, root_uuid from roots
    union
    select s.uuid, w.root_uuid
    from sidechain as s
    join walk as w on s.parent_uuid = w.uuid
),

final as (
    select s.file_idx, s.line, s.sub, min(w.root_uuid) as root_uuid
    from sidechain as s
    join walk as w using (uuid)
    group by all
)

select * from final
