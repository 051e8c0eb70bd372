-- source_lines_out: one row per non-blank physical line, or per object recovered from a line.
-- The line's JSON is kept here (`native`) when records.native does not hold it verbatim.
-- reads: batch_files, batch_lines, batch_rejects, classified, observation_index
-- order: source_file, line, sub
-- (one row per line, or per object of a line: the order tells every row apart)
with lines as (
    select l.* exclude (text), f.source_file, f.session_key, f.is_foreign
    from batch_lines as l
    join batch_files as f using (file_idx)
),

-- the lines' keys, narrow: joining the whole observation (its JSON text included) would build the
-- join's hash table on every line's text
keys as (
    select o.ord, o.file_idx, o.line, o.sub, o.session_key, k.status, k.reason, k.record_id,
    from classified as o
    join observation_index as k using (ord)
),

-- the lines whose JSON records.native does not hold
natives as (
    select ord, c.json from observation_index join classified as c using (ord) where not is_representative
),

-- the text of a line is read only where it is kept (bytes after the last newline): carried along
-- every line, the joins below would hold the whole batch's text
rejected as (
    select x.*, case when x.reason = 'uncommitted' then coalesce(l.raw, encode(l.text)) end as uncommitted
    from batch_rejects as x
    left join batch_lines as l using (file_idx, line)
),

final as (
    select
        l.source_file,
        l.line,
        k.sub,
        l.byte_offset,
        l.byte_length,
        coalesce(k.session_key, l.session_key) as session_key,
        -- bytes after the last newline that do not parse are uncommitted: kept here, no reject, no loss
        case
            when l.is_foreign then 'foreign'
            when x.reason = 'uncommitted' then 'uncommitted'
            when x.line is not null then 'rejected'
            else k.status
        end as status,
        case
            when l.is_foreign then 'foreign_file'
            when x.reason = 'uncommitted' then 'after_last_newline'
            when x.line is not null then x.reason
            when not l.utf8_ok then concat_ws('; ', k.reason, 'invalid_utf8_replaced')
            else k.reason
        end as reason,
        k.record_id,
        n.json as native,
        case when x.reason = 'uncommitted' then x.uncommitted else l.raw end as raw,
    from lines as l
    left join keys as k on k.file_idx = l.file_idx and k.line = l.line
    left join natives as n on n.ord = k.ord
    left join rejected as x on x.file_idx = l.file_idx and x.line = l.line
)

select * from final
