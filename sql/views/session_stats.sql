-- session_stats: one row per stream (session_key): its length in records, its turns (prompts),
-- responses, tool calls and wall-clock duration.
-- reads: sessions, records, inferences, tool_calls
-- prompts: user messages that start a turn: not meta, not injected by the harness or a hook,
-- not a slash command, not a tool result. A prompt whose author the transcript does not say
-- (author null, most versions before 2.1) counts. duration_minutes: from the first to the last
-- timestamp of the stream, idle time included.
with streams as (
    select * from sessions
),

records as (
    select session_key, kind, native_type, author, origin, is_meta from records
),

prompts as (
    select session_key, count(*) as prompts
    from records
    where kind = 'message'
        and native_type = 'user'
        and not coalesce(is_meta, false)
        and author is distinct from 'harness'
        and author is distinct from 'hook'
        and author is distinct from 'tool'
        and origin is distinct from 'command'
        and origin is distinct from 'injected'
    group by session_key
),

responses as (
    select session_key, count(*) as inferences from inferences group by session_key
),

calls as (
    select session_key, count(*) as tool_calls from tool_calls group by session_key
),

final as (
    select
        s.session_key,
        s.stream_kind,
        split_part(s.session_key, '/', 1) as root_session_key,
        s.title,
        s.cwd,
        s.started_at,
        s.ended_at,
        (epoch_ms(s.ended_at) - epoch_ms(s.started_at)) / 60000.0 as duration_minutes,
        s.record_count as records,
        coalesce(p.prompts, 0) as prompts,
        coalesce(r.inferences, 0) as inferences,
        coalesce(c.tool_calls, 0) as tool_calls,
    from streams as s
    left join prompts as p using (session_key)
    left join responses as r using (session_key)
    left join calls as c using (session_key)
)

select * from final
order by started_at nulls last, session_key
