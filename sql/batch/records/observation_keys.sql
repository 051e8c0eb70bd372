-- observation_keys: one row per observation, all its decoded fields with its keys and status
-- (a view: the index is narrow, the JSON text is read from `classified` where it is needed).
-- reads: classified, observation_index
with observations as (
    select * from classified
),

keys as (
    select * from observation_index
),

final as (
    select o.*, k.* exclude (ord)
    from observations as o
    join keys as k using (ord)
)

select * from final
