-- line_checks: one row per non-blank physical line of the batch.
-- Says whether the line is one JSON object; the others go to recovery or rejects.
with lines as (
    select file_idx, line, text from batch_lines
),

final as (
    select
        file_idx,
        line,
        json_valid(text) as is_json,
        -- json_type raises on malformed text, so it only runs on valid lines
        coalesce(case when json_valid(text) then json_type(text) = 'OBJECT' end, false) as is_object,
    from lines
)

select * from final
