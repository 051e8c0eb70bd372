-- archive_lines: one row per non-blank line of each input file being rebuilt from an earlier output,
-- in the file's order, with its bytes and those before it (docs/asr-tables.md, "An output is a
-- source"). A line's bytes are where the output holds them: source_lines.raw (not UTF-8, or
-- uncommitted), source_lines.native (folded, duplicate, recovered), rejects.raw (rejected), else
-- records.native (the line a record keeps). The objects recovered from one line are joined back.
-- The bytes between two lines are the newline and the blank lines (line numbers and byte offsets
-- say how many and how long; their whitespace is written as spaces); before the first line, the byte
-- order mark; after the last, the blank lines the manifest counts and the final newline, up to the
-- file's size. `wanted` names the files, their manifest entry's size, blank lines and byte order
-- mark, and how far to read (`until`: lines starting before that byte offset; `max_line`: lines up
-- to that number, or all when null).
-- reads: records, rejects, source_lines, wanted
with lines as (
    select l.source_file, l.line, l.sub, l.byte_offset, l.byte_length, l.record_id, l.native, l.raw,
    from source_lines as l
    join wanted as w
        on w.source_file = l.source_file and l.byte_offset < w.until and (w.max_line is null or l.line <= w.max_line)
),

-- only the records whose line is read: the join holds their text alone, not every record's
kept_records as (
    select record_id, native from records
    where record_id in (select record_id from lines where native is null and raw is null)
),

texts as (
    select
        l.source_file,
        l.line,
        l.sub,
        l.byte_offset,
        l.byte_length,
        coalesce(l.raw, j.raw, encode(coalesce(l.native, r.native))) as text,
    from lines as l
    left join kept_records as r on r.record_id = l.record_id and l.native is null and l.raw is null
    left join rejects as j
        on j.source_file = l.source_file and j.line = l.line and l.native is null and l.raw is null
),

by_line as (
    select
        source_file,
        line,
        min(byte_offset) as byte_offset,
        max(byte_offset + byte_length) - min(byte_offset) as byte_length,
        -- several objects of one line: JSON texts, joined back (the whitespace between them as spaces, below)
        case when count(*) = 1 then any_value(text) else encode(string_agg(decode(text), '' order by sub)) end as text,
    from texts
    group by source_file, line
),

placed as (
    select
        b.*,
        w.size,
        w.blank_lines,
        w.bom,
        w.until >= w.size and w.max_line is null as whole,
        coalesce(lag(b.line) over file, 0) as line_before,
        coalesce(lag(b.byte_offset + b.byte_length) over file, 0) as end_before,
        lead(b.line) over file is null as is_last,
    from by_line as b
    join wanted as w using (source_file)
    window file as (partition by b.source_file order by b.line)
),

gaps as (
    select
        *,
        -- newlines before the line: the previous line's and one per blank line between
        case when line_before = 0 then line - 1 else line - line_before end as newlines,
        byte_offset - end_before as gap,
    from placed
),

counted as (
    select
        *,
        bom and line_before = 0 and gap - newlines >= 3 as has_bom,
        (blank_lines - sum(case when line_before = 0 then newlines else newlines - 1 end) over (partition by source_file))::bigint
            as blank_after,
        size - byte_offset - byte_length as tail,
    from gaps
),

final as (
    select
        source_file,
        line,
        (case when has_bom then '\xEF\xBB\xBF'::blob else ''::blob end)
        || encode(
            case when line_before = 0 then '' else chr(10) end
            || repeat(' ', greatest(gap - newlines - (case when has_bom then 3 else 0 end), 0))
            || repeat(chr(10), greatest(case when line_before = 0 then newlines else newlines - 1 end, 0))
        )
        || text
        || encode(repeat(' ', greatest(byte_length - octet_length(text), 0)))
        || encode(
            case when is_last and whole and tail > 0 then
                chr(10)
                || repeat(' ', greatest(tail - 1 - greatest(blank_after, 0), 0))
                || repeat(chr(10), least(greatest(blank_after, 0), tail - 1))
            else '' end
        ) as piece,
    from counted
)

select * from final order by source_file, line
