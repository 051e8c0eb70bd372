-- tool_rates: one row per tool kind (execute, edit, read, search, fetch, other): calls, and how
-- often they failed, were denied or were interrupted.
-- reads: tool_calls
-- Rates are over the calls with a result (pending calls, whose result is not in the capture,
-- are counted apart). error: the result is an error and no denial; denied: the permission was
-- refused; interrupted and cancelled: the user or the harness stopped the call. A denial is one
-- whether the result records it in its fields or only in its text (tool_calls.permission_evidence):
-- a person's rejection is never an error.
with calls as (
    select * from tool_calls
),

final as (
    select
        tool_kind,
        count(distinct tool_name) as tools,
        count(*) as calls,
        count(*) filter (where status = 'pending') as pending_calls,
        count(*) filter (where status = 'completed') as completed_calls,
        count(*) filter (where status = 'error') as error_calls,
        count(*) filter (where status = 'denied') as denied_calls,
        count(*) filter (where status in ('interrupted', 'cancelled')) as interrupted_calls,
        count(*) filter (where status = 'error')
            / nullif(count(*) filter (where status <> 'pending'), 0) as error_rate,
        count(*) filter (where status = 'denied')
            / nullif(count(*) filter (where status <> 'pending'), 0) as denial_rate,
        count(*) filter (where status in ('interrupted', 'cancelled'))
            / nullif(count(*) filter (where status <> 'pending'), 0) as interruption_rate,
    from calls
    group by tool_kind
)

select * from final
order by calls desc, tool_kind
