-- approvals: one row per (decider, decision, evidence) of the tool calls whose result records a
-- permission decision (ASR-279: Claude Code stores no permission requests, only the decision).
-- reads: tool_calls
-- decided_by: policy (configuration), user, hook or classifier; decision: allow_once,
-- allow_always or reject_once; evidence: native_field (permissionDecision) or text_marker (a
-- rejection or cancellation the result's text marks, before results carried the field).
-- share: of all calls with a recorded decision.
with calls as (
    select * from tool_calls
    where permission is not null or permission_decided_by is not null
),

final as (
    select
        permission_decided_by as decided_by,
        permission as decision,
        permission_evidence as evidence,
        count(*) as calls,
        count(distinct tool_name) as tools,
        count(*) filter (where status = 'denied') as denied_calls,
        count(*) / sum(count(*)) over () as share,
    from calls
    group by permission_decided_by, permission, permission_evidence
)

select * from final
order by calls desc, decided_by, decision, evidence
