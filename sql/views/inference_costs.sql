-- inference_costs: one row per inference (inference_id): its tokens, the stream and project it
-- belongs to, the agent that wrote it, the price in force on the day of the response, and its cost
-- in USD.
-- reads: inferences, records, sessions, model_prices
-- materialized: table
--
-- Price: the model_prices rows of the same model with the latest effective_date on or before the
-- response's UTC day (price_effective_date); of these, the tier of the response's context length:
-- the row with the largest min_input_tokens not above its total input (input_total_tokens, cache
-- included; unknown: the base price, min_input_tokens 0). The tier prices every token of the
-- response (price_min_input_tokens). No such row: cost_usd is null and is_priced false, never 0.
-- Cost = (uncached input x input price + output x output price + cache reads x read price
--        + 1h cache writes x 1h price + the rest of the cache writes x 5m price) / 1e6.
-- A price the row leaves empty is billed at the input price (1h writes: at the 5m price, else the
-- input price), as genai-prices does for a token type without a price of its own.
-- The aggregate cache_write_tokens is what was written; the 1h split (cache_write_1h_tokens)
-- says how much of it had the 1h TTL, the rest is priced at the 5m rate.
-- A token count that is not reported adds nothing; is_cost_lower_bound says when that happened
-- or when usage_complete is false (the output count is a streaming placeholder). Cache writes
-- not reported lower the bound only where the price charges them (a write price other than 0),
-- or where there is no price: Anthropic bills 5m and 1h writes; OpenAI bills writes only for its
-- GPT-5.6 and later families, and Codex reports cache writes only for those.
-- root_session_key: the stream at the top of the inference's stream's tree (sessions.root_session_key:
-- its lineage followed up; a Codex subagent thread rolls up to the thread that spawned it), the
-- stream itself when it has no sessions row. is_subagent: the stream is not its tree's root (a
-- subagent, sidechain or spawned thread with a known parent).
-- project: the working directory of the stream's root session, else its own.
-- agent: sessions.agent of the inference's stream (claude-code, codex); null when the stream has no
-- sessions row.
with inferences as (
    select * from inferences
),

responses as (
    select record_id, timestamp as responded_at from records where inference_id is not null
),

streams as (
    select session_key, root_session_key, agent, stream_kind, cwd from sessions
),

prices as (
    select * from model_prices
),

located as (
    select
        i.inference_id,
        i.session_key,
        coalesce(s.root_session_key, i.session_key) as root_session_key,
        s.stream_kind,
        coalesce(s.root_session_key <> i.session_key, false) as is_subagent,
        coalesce(root.cwd, s.cwd) as project,
        s.agent,
        i.model,
        r.responded_at,
        cast(timezone('UTC', r.responded_at) as date) as day,
        i.usage_complete,
        i.usage_source,
        i.input_uncached_tokens,
        i.cache_read_tokens,
        i.cache_write_tokens,
        i.cache_write_1h_tokens,
        i.output_total_tokens,
        i.input_total_tokens,
        i.input_total_tokens + i.output_total_tokens as total_tokens,
    from inferences as i
    left join responses as r using (record_id)
    left join streams as s on s.session_key = i.session_key
    left join streams as root on root.session_key = s.root_session_key
),

-- The price of each (model, UTC day) first, then of each response by a join on it: the prices and the
-- model-days are few, so the responses are only probed against them (a join that never holds them).
model_days as (
    select distinct model, day from located where model is not null and day is not null
),

day_prices as (
    select m.model, m.day, max(p.effective_date) as price_effective_date,
    from model_days as m
    join (select distinct model, effective_date from prices) as p
        on p.model = m.model and p.effective_date <= m.day
    group by m.model, m.day
),

dated as (
    select l.*, d.price_effective_date,
    from located as l
    left join day_prices as d using (model, day)
),

-- the context tiers of each (model, effective_date): from min_input_tokens up to the next tier's
tiers as (
    select
        *,
        lead(min_input_tokens) over (partition by model, effective_date order by min_input_tokens) as next_min_input_tokens,
    from prices
),

priced as (
    select
        d.*,
        p.min_input_tokens as price_min_input_tokens,
        coalesce(d.cache_write_1h_tokens, 0) as write_1h,
        greatest(coalesce(d.cache_write_tokens - coalesce(d.cache_write_1h_tokens, 0), 0), 0) as write_5m,
        p.input_usd_per_mtok,
        p.output_usd_per_mtok,
        coalesce(p.cache_read_usd_per_mtok, p.input_usd_per_mtok) as cache_read_usd_per_mtok,
        coalesce(p.cache_write_5m_usd_per_mtok, p.input_usd_per_mtok) as cache_write_5m_usd_per_mtok,
        coalesce(p.cache_write_1h_usd_per_mtok, p.cache_write_5m_usd_per_mtok, p.input_usd_per_mtok)
            as cache_write_1h_usd_per_mtok,
        coalesce(p.cache_write_5m_usd_per_mtok, 0) <> 0 or coalesce(p.cache_write_1h_usd_per_mtok, 0) <> 0
            as has_cache_write_price,
    from dated as d
    left join tiers as p
        on p.model = d.model
        and p.effective_date = d.price_effective_date
        and coalesce(d.input_total_tokens, 0) >= p.min_input_tokens
        and (p.next_min_input_tokens is null or coalesce(d.input_total_tokens, 0) < p.next_min_input_tokens)
),

final as (
    select
        inference_id,
        session_key,
        root_session_key,
        stream_kind,
        is_subagent,
        project,
        agent,
        model,
        responded_at,
        day,
        usage_complete,
        usage_source,
        input_uncached_tokens,
        cache_read_tokens,
        cache_write_tokens,
        cache_write_1h_tokens,
        input_total_tokens,
        output_total_tokens,
        total_tokens,
        price_effective_date,
        price_min_input_tokens,
        price_effective_date is not null as is_priced,
        case when price_effective_date is not null then cast((
            coalesce(input_uncached_tokens, 0) * input_usd_per_mtok
            + coalesce(output_total_tokens, 0) * output_usd_per_mtok
            + coalesce(cache_read_tokens, 0) * cache_read_usd_per_mtok
            + write_1h * cache_write_1h_usd_per_mtok
            + write_5m * cache_write_5m_usd_per_mtok
        ) / 1e6 as double) end as cost_usd,
        not usage_complete
            or input_uncached_tokens is null
            or output_total_tokens is null
            or cache_read_tokens is null
            or (cache_write_tokens is null and (price_effective_date is null or has_cache_write_price))
            as is_cost_lower_bound,
    from priced
)

select * from final
