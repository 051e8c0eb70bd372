-- report: one row per period of `asr-batch report` ($period: daily, the local day of the response;
-- monthly, its local month; session, the main session its stream belongs to; project, the main
-- session's working directory): tokens, cost and whether the cost is a lower bound.
-- reads: inference_costs, sessions
-- Local days are those of the time zone in the variable asr_timezone (batch/report.py sets it; UTC
-- when it is not set).
-- name (session): the root session's title, else its first prompt; project (session): its
-- working directory.
-- cost_usd: of the priced responses, rounded to millionths of a dollar.
-- $since and $until (local dates, inclusive, null for no bound) select the responses counted.
-- A response without a timestamp has no day: it counts in no period of a daily or monthly report
-- and, when $since or $until is given, in none at all.
with costs as (
    select * from inference_costs
),

located as (
    select
        *,
        asr_local_day(responded_at) as local_day,
    from costs
),

chosen as (
    select * from located
    where ($since is null or local_day >= $since)
        and ($until is null or local_day <= $until)
        and (local_day is not null or $period in ('session', 'project'))
),

names as (
    select session_key as root_session_key, coalesce(title, first_prompt) as session_name from sessions
),

keyed as (
    select
        case $period
            when 'daily' then strftime(local_day, '%Y-%m-%d')
            when 'monthly' then strftime(local_day, '%Y-%m')
            when 'session' then root_session_key
            else project
        end as period,
        c.*,
        n.session_name,
    from chosen as c
    left join names as n using (root_session_key)
),

final as (
    select
        period,
        any_value(session_name) as name,
        any_value(project) as project,
        list_sort(list(distinct model)) as models,
        count(*) as inferences,
        cast(sum(input_uncached_tokens) as bigint) as input_tokens,
        cast(sum(output_total_tokens) as bigint) as output_tokens,
        cast(sum(cache_write_tokens) as bigint) as cache_write_tokens,
        cast(sum(cache_read_tokens) as bigint) as cache_read_tokens,
        cast(sum(total_tokens) as bigint) as total_tokens,
        round(sum(cost_usd), 6) as cost_usd,
        bool_or(is_cost_lower_bound) as is_lower_bound,
        count(*) filter (where not is_priced) as unpriced_inferences,
        min(local_day) as first_day,
        max(local_day) as last_day,
    from keyed
    group by period
)

select * from final
order by period nulls last
