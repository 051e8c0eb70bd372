-- input_requests: one row per AskUserQuestion call (call_id) per stream.
-- Registry "Questions": AskUserQuestion → input_request with mode: questions and callId. Questions
-- have no IDs: id is the question's 0-based position as a string. The result's answers map (keyed
-- by question text, several choices joined by commas) → answers with selected when the text equals
-- an option label and text otherwise; the free-text response → response; a result resolved by
-- afkTimeoutMs → status: timed_out.
-- reads: batch_parts, batch_tool_calls, classified
with tool_calls as (
    select * from batch_tool_calls
),

-- only the blocks of AskUserQuestion calls are read
parts as (
    select * from batch_parts
    where call_id in (select call_id from tool_calls where tool_name = 'AskUserQuestion')
),

calls as (
    select
        c.*,
        case
            when json_type(c.input -> '$.questions') = 'ARRAY' then c.input -> '$.questions'
            when json_type(c.result_native -> '$.questions') = 'ARRAY' then c.result_native -> '$.questions'
        end as question_list,
        case when json_type(c.result_native -> '$.answers') = 'OBJECT' then c.result_native -> '$.answers' end
            as answer_map,
    from tool_calls as c
    where c.tool_name = 'AskUserQuestion'
),

blocks as (
    select
        c.session_key,
        c.call_id,
        -- a block's JSON is read from the line it was first seen in
        json_extract(lu.json, u.native_path) as tool_use_block,
        json_extract(lr.json, r.native_path) as tool_result_block,
        r.text as result_text,
    from calls as c
    left join parts as u
        on u.record_id = c.call_record_id and u.call_id = c.call_id and u.part_type = 'tool_use'
    left join parts as r
        on r.record_id = c.result_record_id and r.call_id = c.call_id and r.part_type = 'tool_result'
    left join classified as lu on lu.ord = u.source_ord
    left join classified as lr on lr.ord = r.source_ord
    qualify row_number() over (partition by c.session_key, c.call_id order by u.part_index, r.part_index) = 1
),

question_index as (
    select
        session_key,
        call_id,
        question_list,
        unnest(range(json_array_length(question_list)::bigint)) as idx,
    from calls
    where question_list is not null
),

questions as (
    select
        session_key,
        call_id,
        idx,
        idx::varchar as question_id,
        question_list -> idx::integer as q,
        question_list -> idx::integer ->> '$.question' as question,
        json_extract_string(question_list -> idx::integer, '$.options[*].label') as labels,
    from question_index
),

question_json as (
    select
        session_key,
        call_id,
        count(*) as question_count,
        to_json(list(
            json_object(
                'id', question_id,
                'question', question,
                'header', q -> '$.header',
                'options', q -> '$.options',
                'multiSelect', q -> '$.multiSelect'
            )
            order by idx
        )) as questions,
    from questions
    group by all
),

answer_entries as (
    select
        session_key,
        call_id,
        unnest(map_entries(json_transform(answer_map, '"MAP(VARCHAR, JSON)"'))) as entry,
    from calls
    where answer_map is not null
),

answer_values as (
    select
        a.session_key,
        a.call_id,
        a.entry.key as question,
        case
            when json_type(a.entry.value) = 'VARCHAR' then a.entry.value ->> '$'
            else a.entry.value::varchar
        end as answer,
        q.question_id,
        q.idx,
        coalesce(q.labels, []::varchar[]) as labels,
    from answer_entries as a
    left join questions as q
        on q.session_key = a.session_key and q.call_id = a.call_id and q.question = a.entry.key
    qualify row_number() over (partition by a.session_key, a.call_id, a.entry.key order by q.idx) = 1
),

answer_pieces as (
    select
        *,
        list_transform(string_split(answer, ','), lambda x: trim(x)) as pieces,
    from answer_values
),

answer_split as (
    select
        *,
        case
            when list_contains(labels, answer) then [answer]
            else list_filter(pieces, lambda x: list_contains(labels, x))
        end as selected,
        case
            when list_contains(labels, answer) then null
            when len(list_filter(pieces, lambda x: list_contains(labels, x))) = 0 then answer
            else nullif(array_to_string(list_filter(pieces, lambda x: not list_contains(labels, x)), ', '), '')
        end as text,
    from answer_pieces
),

answer_json as (
    select
        session_key,
        call_id,
        to_json(list(
            case
                when len(selected) > 0 and text is not null then json_object(
                    'question_id', question_id, 'question', question, 'selected', selected, 'text', text
                )
                when len(selected) > 0 then json_object(
                    'question_id', question_id, 'question', question, 'selected', selected
                )
                else json_object('question_id', question_id, 'question', question, 'text', text)
            end
            order by idx nulls last, question
        )) as answers,
    from answer_split
    group by all
),

joined as (
    select
        c.*,
        b.tool_use_block,
        b.tool_result_block,
        b.result_text,
        qj.question_count,
        qj.questions,
        case
            when aj.answers is not null then aj.answers
            when c.answer_map is not null then '[]'::json
        end as answers,
        c.result_native ->> '$.response' as response,
        case when json_type(c.result_native -> '$.annotations') = 'OBJECT' then c.result_native -> '$.annotations' end
            as annotations,
        json_bigint(c.result_native -> '$.afkTimeoutMs') as afk_timeout_ms,
    from calls as c
    left join blocks as b using (session_key, call_id)
    left join question_json as qj using (session_key, call_id)
    left join answer_json as aj using (session_key, call_id)
),

final as (
    select
        call_id,
        session_key,
        'questions' as mode,
        case
            when result_record_id is null then 'pending'
            when coalesce(is_error, false) or json_type(result_native) = 'VARCHAR' then 'rejected'
            when (result_native -> '$.afkTimeoutMs') is not null then 'timed_out'
            when json_array_length(answers) > 0 or response is not null then 'answered'
            when answer_map is null and result_text like 'User has answered%' then 'answered'
            else 'unanswered'
        end as status,
        call_record_id,
        result_record_id,
        called_at as asked_at,
        result_at as resolved_at,
        question_count,
        questions,
        answers,
        response,
        annotations,
        afk_timeout_ms,
        is_error,
        json_object(
            'tool_use', tool_use_block,
            'tool_result', tool_result_block,
            'toolUseResult', result_native::json
        ) as native,
    from joined
)

select * from final
order by session_key, call_id
