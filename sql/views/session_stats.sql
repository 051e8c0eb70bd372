-- session_stats: one row per stream (session_key): its length in records, its turns, responses,
-- tool calls and wall-clock duration.
-- reads: sessions, records, inferences, tool_calls
-- turns: user messages that start a turn of the model: a prompt (not meta, not injected by the
-- harness or a hook, not a tool result; one whose author the transcript does not say counts),
-- or a slash command that Claude Code expanded into a prompt (the next user message is its
-- meta expansion, as /init or a custom command); local commands (/exit, /export, /compact)
-- answered by the harness alone are not turns. Claude Code's "[Request interrupted by user]"
-- line is a user message without author marker in versions before 2.1: it counts as a turn.
-- duration_minutes: from the first to the last timestamp of the stream, idle time included.
with streams as (
    select * from sessions
),

user_messages as (
    select
        session_key,
        author,
        origin,
        is_meta,
        lead(is_meta) over (partition by session_key order by seq) as is_next_meta,
    from records
    where kind = 'message' and native_type = 'user'
),

turns as (
    select session_key, count(*) as turns
    from user_messages
    where not coalesce(is_meta, false)
        and author is distinct from 'harness'
        and author is distinct from 'hook'
        and author is distinct from 'tool'
        and origin is distinct from 'injected'
        and (origin is distinct from 'command' or coalesce(is_next_meta, false))
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
        s.root_session_key,
        s.title,
        s.cwd,
        s.started_at,
        s.ended_at,
        (epoch_ms(s.ended_at) - epoch_ms(s.started_at)) / 60000.0 as duration_minutes,
        s.record_count as records,
        coalesce(t.turns, 0) as turns,
        coalesce(r.inferences, 0) as inferences,
        coalesce(c.tool_calls, 0) as tool_calls,
    from streams as s
    left join turns as t using (session_key)
    left join responses as r using (session_key)
    left join calls as c using (session_key)
)

select * from final
order by started_at nulls last, session_key
