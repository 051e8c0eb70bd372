-- unpriced_models: one row per (agent, model) with inferences that have no price in model_prices
-- on the day of the response: these inferences have a null cost_usd and no total counts them.
-- reads: inference_costs, model_prices
-- Models genai-prices does not know (for the vendor of their agent) are unpriced on every day.
-- priced_from: the earliest effective_date the table has for the model (null: never priced);
-- responses before it are unpriced too. Price them with a row in a price file laid out like
-- data/pricing.csv: `asr-batch catalog OUT --prices FILE` (or `convert --prices FILE`).
with costs as (
    select * from inference_costs
    where not is_priced
),

prices as (
    select model, min(effective_date) as priced_from from model_prices group by model
),

final as (
    select
        c.agent,
        c.model,
        count(*) as inferences,
        cast(sum(c.total_tokens) as bigint) as total_tokens,
        cast(sum(c.output_total_tokens) as bigint) as output_total_tokens,
        min(c.day) as first_day,
        max(c.day) as last_day,
        any_value(p.priced_from) as priced_from,
    from costs as c
    left join prices as p using (model)
    group by c.agent, c.model
)

select * from final
order by inferences desc, agent, model
