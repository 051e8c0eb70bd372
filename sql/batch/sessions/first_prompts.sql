-- first_prompts: one row per stream of the batch that has a prompt: its first, for sessions.first_prompt.
-- reads: batch_parts, records_full
-- order: session_key
-- A prompt is a message the classification gives to a person (author human), a subagent's launch
-- prompt (author agent, origin prompt), or a user message whose author the transcript does not say
-- (no author, no origin: Claude Code before origin markers), not meta and not copied from another
-- session (a fork's copy of its parent's history). So the harness's
-- messages are not prompts: command wrappers (<command-name>, <local-command-stdout>), Caveat meta
-- lines, compaction summaries, task notifications, Codex's environment context and instructions.
-- Its text: its text parts but those Claude Code writes itself into a message without author, the
-- interrupted markers ([Request interrupted by user...]), a user's shell command (<bash-input>), the
-- IDE's and hooks' context (<ide_...>, <system-reminder>) and untagged task notifications, joined
-- with a space; every run of whitespace one space, trimmed, cut at 200 characters (the first 1,000
-- characters of each part are read). A prompt with no such text (an image alone) is skipped.
-- A stream whose person typed only slash commands (origin command: `/init`, `/review 12`) is named
-- by its first command as typed: the command's name and its arguments.
with candidates as (
    select record_id, session_key, seq, coalesce(origin = 'command', false) as is_command
    from records_full
    where kind = 'message'
        and not coalesce(is_meta, false)
        and copied_from_session_id is null
        and (
            author = 'human'
            or (author = 'agent' and origin = 'prompt')
            or (author is null and origin is null and native_type = 'user')
            or (author is null and origin = 'command')
        )
),

texts as (
    select
        c.session_key,
        c.seq,
        c.record_id,
        c.is_command,
        case
            when c.is_command then concat_ws(
                ' ',
                regexp_extract(left(p.text, 1000), '<command-name>(.*?)</command-name>', 1),
                regexp_extract(left(p.text, 1000), '<command-args>(.*?)</command-args>', 1)
            )
            else left(p.text, 1000)
        end as text,
        p.part_index,
    from candidates as c
    join batch_parts as p using (record_id)
    where p.part_type = 'text'
        and not regexp_matches(
            p.text, '^\s*(\[Request interrupted by user|<bash-input>|<ide_|<system-reminder>|<task-notification>)'
        )
),

prompts as (
    select
        session_key,
        seq,
        record_id,
        is_command,
        trim(regexp_replace(string_agg(text, ' ' order by part_index), '[ \t\n\v\f\r]+', ' ', 'g')) as text,
    from texts
    group by session_key, seq, record_id, is_command
),

final as (
    select session_key, record_id, seq, left(text, 200) as text,
    from prompts
    where text <> ''
    qualify row_number() over (partition by session_key order by is_command, seq, record_id) = 1
)

select * from final
