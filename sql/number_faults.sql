-- number_faults: one row per count that is present but is no integer fitting its column (a float, a
-- string, a boolean, or an integer beyond 64 bits). Its column is null (not reported), the line keeps
-- the value verbatim, and losses.sql declares it (category number_not_mapped), naming field and position.
-- Work table: written per batch, read by losses.sql over all batches.
with faults as (
    select session_key, source_file, line, position, number_faults
    from classified
    where len(number_faults) > 0
),

final as (
    select
        session_key,
        source_file,
        line,
        position,
        split_part(fault, '=', 1) as field,
        substr(fault, strpos(fault, '=') + 1) as native_value,
    from faults, unnest(number_faults) as u(fault)
)

select * from final
order by session_key, source_file, line, field
