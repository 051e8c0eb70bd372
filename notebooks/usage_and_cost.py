import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo
    import matplotlib.pyplot as plt

    from common import open_output, save

    out, con, charts = open_output(mo.cli_args())
    return charts, con, mo, out, plt, save


@app.cell
def _(con, mo, out):
    totals = con.sql("""
        select
            count(*) as inferences,
            sum(total_tokens) as total_tokens,
            sum(output_total_tokens) as output_tokens,
            sum(cost_usd) as cost_usd,
            count(*) filter (where not is_priced) as unpriced,
            count(*) filter (where not usage_complete) as incomplete,
            min(day) as first_day,
            max(day) as last_day,
        from inference_costs
    """).fetchall()[0]
    n, tokens, output, cost, unpriced, incomplete, first_day, last_day = totals
    mo.md(f"""
    # Usage and cost

    Output folder `{out}`: **{n:,} model responses** from {first_day} to {last_day},
    **{tokens or 0:,} tokens** (input, cache and output), **${cost or 0:,.2f}** at list prices
    (the catalog's `model_prices`, from genai-prices; the price in force on the day of each response).

    - {incomplete:,} responses ({incomplete / max(n, 1):.0%}) have no final usage line: their
      output count is a streaming placeholder, so output tokens and cost are **lower bounds**
      (see `usage_completeness` below).
    - {unpriced:,} responses are of a model without a price on their day: they have no cost and
      are listed in `unpriced_models`, never counted as $0.
    """)
    return


@app.cell
def _(charts, con, plt, save):
    # one series per (agent, model): the same model name can come from Claude Code and Codex
    by_day = con.sql("""
        select day, coalesce(agent, '?') || '/' || coalesce(model, '?') as series,
               cast(sum(total_tokens) as bigint) as total_tokens
        from usage_by_day
        group by all
        order by day, series
    """).pl()
    days = sorted(set(by_day["day"].to_list()))
    series = sorted(set(by_day["series"].to_list()))
    fig_tokens, ax_tokens = plt.subplots(figsize=(9, 4))
    bottom = [0] * len(days)
    for label in series:
        per_day = dict(by_day.filter(by_day["series"] == label).select("day", "total_tokens").iter_rows())
        heights = [(per_day.get(day) or 0) / 1e6 for day in days]
        ax_tokens.bar(range(len(days)), heights, bottom=bottom, label=label)
        bottom = [b + h for b, h in zip(bottom, heights)]
    # one bar per day with responses; at most 12 date labels, so that they never overlap
    step = max(1, -(-len(days) // 12))
    ax_tokens.set_xticks(range(0, len(days), step), [str(d) for d in days[::step]])
    ax_tokens.set_ylabel("million tokens (input, cache and output)")
    ax_tokens.set_title("Tokens per day with responses (UTC), by agent/model")
    ax_tokens.legend(fontsize="small", frameon=False)
    ax_tokens.tick_params(axis="x", labelrotation=45, labelsize="small")
    for tick in ax_tokens.get_xticklabels():
        tick.set_horizontalalignment("right")
    ax_tokens.spines[["top", "right"]].set_visible(False)
    save(fig_tokens, charts, "tokens_by_day_and_model")
    return


@app.cell
def _(charts, con, plt, save):
    projects = con.sql("""
        select project, cost_usd, unpriced_inferences, is_lower_bound
        from usage_by_project
        where cost_usd is not null
        order by cost_usd desc
        limit 15
    """).pl()
    fig_cost, ax_cost = plt.subplots(figsize=(9, 0.4 * len(projects) + 1.2))
    labels = [p if len(p) <= 45 else "…" + p[-44:] for p in projects["project"].to_list()]
    ax_cost.barh(labels[::-1], projects["cost_usd"].to_list()[::-1], color="#4c72b0")
    ax_cost.set_xlabel("USD at list prices (a lower bound where output counts are placeholders)")
    ax_cost.set_title("Cost by project (working directory of the main session)")
    ax_cost.spines[["top", "right"]].set_visible(False)
    save(fig_cost, charts, "cost_by_project")
    return


@app.cell
def _(con, mo):
    mo.vstack([
        mo.md("## The costliest sessions (subagents included)"),
        con.sql("""
            select cost_rank, root_session_key, project, title, models, inferences, total_tokens,
                   round(cost_usd, 4) as cost_usd, round(share_of_cost, 3) as share_of_cost, is_lower_bound
            from costliest_sessions
            where cost_rank <= 10
        """).pl(),
    ])
    return


@app.cell
def _(con, mo):
    mo.vstack([
        mo.md("""
        ## How much is a lower bound

        `output_lower_bound_share`: the part of each agent's and model's output tokens that comes
        from responses whose final usage was never written (Claude Code's streaming placeholders).
        """),
        con.sql("select * from usage_completeness").pl(),
        mo.md("## Models without a price"),
        con.sql("select * from unpriced_models").pl(),
    ])
    return


@app.cell
def _(con, mo):
    mo.vstack([
        mo.md("## Cache hit ratio by agent and model"),
        con.sql("""
            select agent, model, sum(cache_read_tokens) / nullif(sum(input_total_tokens), 0) as cache_hit_ratio,
                   sum(input_total_tokens) as input_total_tokens
            from cache_hit_ratio
            group by agent, model
            order by input_total_tokens desc, agent, model
        """).pl(),
    ])
    return


if __name__ == "__main__":
    app.run()
