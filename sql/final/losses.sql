-- losses: one row per (stream, loss category) that applies (ASR-157).
-- reads: background_tasks, compactions, inferences, lineage, lineage_evidence, number_faults, parts, rejects, sessions, source_lines, tool_calls, usage_summaries
with streams as (
    select session_key, stream_kind, agent from sessions
),

incomplete as (
    select session_key, count(*) as n
    from inferences
    where not usage_complete
    group by session_key
),

compactions as (
    select session_key, count(*) as n
    from compactions
    group by session_key
),

rejected as (
    select session_key, count(*) as n
    from source_lines
    where status = 'rejected'
    group by session_key
),

-- a background command whose output read records a native exit code (background_tasks.exit_code)
-- has one: its launching call is not counted. Codex records exit codes: its converter declares the
-- calls whose exit code it does not read (formats/codex/tables.py, source_losses).
shell_calls as (
    select c.session_key, count(*) as n
    from tool_calls as c
    left join streams as s using (session_key)
    anti join (
        select session_key, call_id from background_tasks where exit_code is not null and call_id is not null
    ) as b using (session_key, call_id)
    where c.tool_kind = 'execute' and s.agent is distinct from 'codex'
    group by c.session_key
),

truncated_outputs as (
    select session_key, count(*) as n
    from parts
    where capture_state = 'truncated'
    group by session_key
),

summaries as (
    select session_key, scope, count(*) as n
    from usage_summaries
    where session_key is not null
    group by session_key, scope
),

-- subagents a parent's tool result names (agentId) with no stream at all: no transcript, no progress copy
unseen_agents as (
    select e.parent_session_key as session_key, count(distinct e.child_session_key) as n
    from lineage_evidence as e
    anti join sessions as s on s.session_key = e.child_session_key
    where e.relation = 'spawned_by' and e.source = 'tool_result.agentId' and e.parent_session_key is not null
    group by e.parent_session_key
),

rebuilt as (
    select session_key from sessions where rebuilt_from is not null
),

-- counts present in a form no column can hold: named one by one (field=value at source_file position)
unmapped_numbers as (
    select
        session_key,
        count(*) as n,
        string_agg(field || '=' || native_value || ' at ' || source_file || ' ' || position, '; '
            order by source_file, line, field) as listed,
    from number_faults
    group by session_key
),

foreign_files as (
    select count(*) as n from rejects where reason = 'foreign_file'
),

final as (
    select
        session_key,
        'model_rendering' as category,
        'the transcript does not hold the rendered model request (system prompt, tool definitions, '
            || 'exact context window); records show what '
            || case when agent = 'codex' then 'Codex' else 'Claude Code' end || ' persisted' as detail,
        cast(null as bigint) as count,
    from streams

    union all

    select
        session_key,
        'usage_incomplete',
        'responses whose latest observation has no stop reason: upstream wrote streaming placeholders, '
            || 'so output_total_tokens is a lower bound',
        n,
    from incomplete

    union all

    select
        session_key,
        'context_boundary',
        'compactions replace the context; the exact context after each boundary is not recorded',
        n,
    from compactions

    union all

    select
        s.session_key,
        'lineage',
        case
            when l.evidence = 'native_field_partial' and l.evidence_detail similar to '.*(spawn_agent|collab_agent_spawn_end|CollabAgentToolCall).*'
                then 'the call that names this Codex subagent thread is not in the session its session_meta names '
                    || 'as its parent thread: lineage.evidence native_field_partial'
            else case l.evidence
            when 'native_field_partial' then 'only one of the two native fields the registry entry names (the '
                || 'sidecar toolUseId, the parent tool result naming the agentId) ties this subagent to its '
                || 'spawning call, or they disagree: lineage.evidence native_field_partial'
            when 'progress_field' then 'only agent_progress lines (data.agentId with parentToolUseID) tie this '
                || 'subagent to its spawning call, which is not the registry entry''s evidence: lineage.evidence progress_field'
            when 'content_match' then 'the spawning call is matched by prompt text only, which is not the registry '
                || 'entry''s evidence: lineage.evidence content_match'
            else 'no native field names the tool call that spawned this subagent'
        end end,
        cast(null as bigint),
    from streams as s
    left join (select session_key, evidence, evidence_detail from lineage where relation = 'spawned_by') as l
        using (session_key)
    -- native_structure: an Entire tasks/<tool use id>/ folder names the call (companion, Prefer the native transcript)
    where s.stream_kind <> 'main' and coalesce(l.evidence not in ('native_field', 'native_structure'), true)

    union all

    select
        session_key,
        'subagent_transcript_absent',
        'the subagent transcript is not in the archive: the stream was rebuilt from the agent_progress '
            || 'copies in its parent, which keep no parent links, no metadata lines and often no final usage',
        cast(null as bigint),
    from rebuilt

    union all

    select
        session_key,
        'subagent_transcript_absent',
        'subagents this stream launched (a tool result names their agentId) whose transcripts are not in the '
            || 'archive and whose messages no progress line holds: listed in the manifest (export_report.retention)',
        n,
    from unseen_agents

    union all

    select
        session_key,
        'shell_exit_code',
        'Claude Code records no numeric exit code for shell commands: success is known only from is_error '
            || '(background commands whose exit code an output read records are not counted: background_tasks.exit_code)',
        n,
    from shell_calls

    union all

    select
        session_key,
        'tool_output_truncated',
        'tool outputs persisted to tool-results/ whose file is not in the archive (deleted by retention or not copied)',
        n,
    from truncated_outputs

    union all

    select
        session_key,
        'accounting_join',
        case scope
            when 'checkpoint' then 'Entire checkpoint token_usage totals (usage_summaries) are not joined to the '
                || 'inferences they count: the metadata does not say which responses a total includes, so they '
                || 'are kept beside inferences and not reconciled with them'
            else 'cost-state totals (usage_summaries) are not joined to the inferences they count: the transcript '
                || 'does not say which responses (or whether subagents) a total includes, so they are kept beside '
                || 'inferences and not reconciled with them'
        end,
        n,
    from summaries

    union all

    select
        session_key,
        'number_not_mapped',
        'counts that are not integers fitting a 64-bit column are null in the tables and kept verbatim in '
            || 'the line''s native JSON: ' || listed,
        n,
    from unmapped_numbers

    union all

    select
        session_key,
        'rejected_lines',
        'lines that are not JSON objects (see rejects): their bytes are kept, their content is not mapped',
        n,
    from rejected

    union all

    select
        cast(null as varchar),
        'foreign_input',
        'files that are not Claude Code JSONL (see rejects): not converted',
        n,
    from foreign_files
    where n > 0
)

select * from final
order by session_key nulls first, category
