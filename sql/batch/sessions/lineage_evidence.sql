-- lineage_evidence: one row per native fact that ties a subagent to the call that spawned it.
-- Sources: the sidecar's toolUseId, the parent's tool result naming agentId, and agent_progress
-- lines (data.agentId with parentToolUseID); for inline 1.0.x sidechains, which carry no
-- agentId, the parent's Task call whose input.prompt equals the sidechain's first text.
-- Also forks: forkedFrom on copied records and fork-context-ref lines. Resolved across
-- batches by lineage.sql.
-- reads: batch_files, batch_parts, classified, observation_index, records_full
-- order: child_session_key, source, parent_session_key, call_id, role
-- (each source below is distinct over every column, and the relation follows from the source, so the
-- order tells every row apart; without it, the rows came in the order DuckDB scanned batch_parts)
with files as (
    select * from batch_files where not is_foreign
),

streams as (
    select distinct session_key, session_id, parent_session_id from files
),

-- the records read below, with their JSON text kept only where it is read: tool results whose
-- toolUseResult names agentId, agent_progress lines, first records, copied records and
-- fork-context-ref lines
recs as (
    select
        record_id, session_key, seq, progress_agent_id, parent_tool_use_id, copied_from_session_id,
        kind = 'tool_result' and contains(tool_use_result, 'agentId') as names_agent,
        case when kind = 'tool_result' and contains(tool_use_result, 'agentId') then tool_use_result end
            as tool_use_result,
        native_subtype = 'agent_progress' and progress_agent_id is not null and parent_tool_use_id is not null
            as is_agent_progress,
        case when native_type = 'fork-context-ref' then native end as fork_ref,
    from records_full
    where (kind = 'tool_result' and contains(tool_use_result, 'agentId'))
        or (native_subtype = 'agent_progress' and progress_agent_id is not null and parent_tool_use_id is not null)
        or seq = 1
        or copied_from_session_id is not null
        or native_type = 'fork-context-ref'
),

from_sidecar as (
    select distinct
        session_key as child_session_key,
        'spawned_by' as relation,
        cast(null as varchar) as parent_session_key,
        json_extract_string(sidecar, '$.toolUseId') as call_id,
        json_extract_string(sidecar, '$.agentType') as role,
        'sidecar.toolUseId' as source,
    from files
    where json_extract_string(sidecar, '$.toolUseId') is not null
),

results as (
    select r.*, p.call_id
    from recs as r
    join batch_parts as p using (record_id)
    where r.names_agent and p.part_type = 'tool_result'
        and json_extract_string(r.tool_use_result, '$.agentId') is not null
),

from_results as (
    select distinct
        coalesce(s.parent_session_id, s.session_id) || '/' || json_extract_string(r.tool_use_result, '$.agentId')
            as child_session_key,
        'spawned_by' as relation,
        r.session_key as parent_session_key,
        r.call_id,
        json_extract_string(r.tool_use_result, '$.agentType') as role,
        'tool_result.agentId' as source,
    from results as r
    join streams as s using (session_key)
),

from_progress as (
    select distinct
        coalesce(s.parent_session_id, s.session_id) || '/' || r.progress_agent_id as child_session_key,
        'spawned_by' as relation,
        r.session_key as parent_session_key,
        r.parent_tool_use_id as call_id,
        cast(null as varchar) as role,
        'progress.agentId' as source,
    from recs as r
    join streams as s using (session_key)
    where r.is_agent_progress
),

sidechain_prompts as (
    select r.session_key, p.text
    from recs as r
    join batch_parts as p using (record_id)
    where r.seq = 1 and p.part_index = 0
        and r.session_key in (
            select c.session_key
            from observation_index as i
            join classified as c using (ord)
            where c.stream_kind = 'sidechain'
        )
),

prompt_calls as (
    select
        session_key,
        call_id,
        json_extract_string(tool_input, '$.prompt') as prompt,
        json_extract_string(tool_input, '$.subagent_type') as role,
    from batch_parts
    -- only the sidechains' parent streams are searched for the prompt (a call without one
    -- matches no text below)
    where part_type = 'tool_use'
        and session_key in (select split_part(session_key, '/sidechain-', 1) from sidechain_prompts)
),

from_prompt as (
    select distinct
        sp.session_key as child_session_key,
        'spawned_by' as relation,
        c.session_key as parent_session_key,
        c.call_id,
        c.role,
        'tool_use.prompt' as source,
    from sidechain_prompts as sp
    join prompt_calls as c
        on c.prompt = sp.text and c.session_key = split_part(sp.session_key, '/sidechain-', 1)
),

-- forkedFrom on copied records (proof native_field) and fork-context-ref (a referenced prefix)
from_fork as (
    select distinct
        session_key as child_session_key,
        'forked_from' as relation,
        copied_from_session_id as parent_session_key,
        cast(null as varchar) as call_id,
        cast(null as varchar) as role,
        'records.forkedFrom' as source,
    from recs
    where copied_from_session_id is not null
),

from_fork_ref as (
    select distinct
        session_key as child_session_key,
        'inherits' as relation,
        fork_ref->>'$.parentSessionId' as parent_session_key,
        cast(null as varchar) as call_id,
        cast(null as varchar) as role,
        'fork-context-ref' as source,
    from recs
    where (fork_ref->>'$.parentSessionId') is not null
),

final as (
    select * from from_sidecar
    union all
    select * from from_fork
    union all
    select * from from_fork_ref
    union all
    select * from from_prompt
    union all
    select * from from_results
    union all
    select * from from_progress
)

select * from final
