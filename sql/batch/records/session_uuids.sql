-- session_uuids: the uuid map of a batch's sessions, (session_key, uuid) -> the record of its live
-- observations (the least record_id where live observations of one uuid went into several), from
-- narrow columns alone. checkpoint_files.sql reads it.
-- reads: classified, observation_index
with live as (
    select c.session_key, c.uuid, i.record_id
    from observation_index as i
    join classified as c using (ord)
    where c.uuid is not null and i.is_live
),

final as (
    select session_key, uuid, min(record_id) as record_id
    from live
    group by session_key, uuid
)

select * from final
