-- line_checks: one row per non-blank physical line of the batch.
-- Says whether the line is one JSON object; the others go to recovery or rejects.
-- reads: batch_lines
with lines as (
    select file_idx, line, text from batch_lines
),

final as (
    select
        file_idx,
        line,
        json_valid(text) as is_json,
        -- valid JSON whose first character is `{` is an object (one parse per line)
        json_valid(text) and starts_with(ltrim(text, ' ' || chr(9) || chr(13)), '{') as is_object,
    from lines
)

select * from final
