-- entire_events: one row per non-blank line of an Entire agent-protocol events file (formats/entire_events.py).
-- reads: event_lines
-- An event (reference "External agent protocol", Event) is a JSON object with an integer `type`
-- (1..7 named below; any other integer is kept as an unknown event) and a non-empty string
-- `session_id`. Anything else is rejected with the reason, never dropped.
with lines as (
    select file_idx, line, json_valid(text) as is_json, case when json_valid(text) then text end as json_text
    from event_lines
),

-- the JSON functions read only valid JSON (null otherwise): they fail on any other text
checked as (
    select *, coalesce(json_type(json_text) = 'OBJECT', false) as is_object
    from lines
),

objects as (
    select file_idx, line, is_json, is_object, case when is_object then json_text end as text
    from checked
),

fields as (
    select
        file_idx,
        line,
        is_json,
        is_object,
        case when is_object then json_bigint(text -> '$.type') end as event_type,
        case when is_object and json_type(text, '$.session_id') = 'VARCHAR' and (text->>'$.session_id') <> ''
            then text->>'$.session_id' end as session_id,
        case when is_object and json_type(text, '$.previous_session_id') = 'VARCHAR'
                and (text->>'$.previous_session_id') <> ''
            then text->>'$.previous_session_id' end as previous_session_id,
        case when is_object and json_type(text, '$.model') = 'VARCHAR' and (text->>'$.model') <> ''
            then text->>'$.model' end as model,
        case when is_object and json_type(text, '$.timestamp') = 'VARCHAR'
            then try_cast(text->>'$.timestamp' as timestamptz) end as timestamp,
        case when is_object then json_type(text, '$.type') end as type_json,
    from objects
),

final as (
    select
        file_idx,
        line,
        event_type,
        session_id,
        previous_session_id,
        model,
        timestamp,
        case event_type
            when 1 then 'SessionStart'
            when 2 then 'TurnStart'
            when 3 then 'TurnEnd'
            when 4 then 'Compaction'
            when 5 then 'SessionEnd'
            when 6 then 'SubagentStart'
            when 7 then 'SubagentEnd'
        end as event_name,
        case
            when not is_json then 'invalid_json'
            when not is_object then 'not_an_object'
            when event_type is null then 'not_an_event'
            when session_id is null then 'missing_session_id'
        end as reason,
        case
            when not is_json then 'not valid JSON'
            when not is_object then 'a JSON value that is not an object'
            when event_type is null and type_json in ('UBIGINT', 'BIGINT') then 'type is an integer beyond 64 bits: '
                || 'not an agent-protocol event type'
            when event_type is null then 'type is ' || coalesce(lower(type_json), 'absent')
                || ', not an integer: not an agent-protocol event (the append-only message, append, result, '
                || 'usage and drop records are not read)'
            when session_id is null then 'an event needs a non-empty string session_id'
        end as detail,
    from fields
)

select * from final
order by file_idx, line
