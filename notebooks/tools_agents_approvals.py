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
    calls, pending, streams, subagents = con.sql("""
        select
            (select count(*) from tool_calls),
            (select count(*) from tool_calls where status = 'pending'),
            (select count(*) from sessions),
            (select count(*) from sessions where stream_kind <> 'main'),
    """).fetchall()[0]
    mo.md(f"""
    # Tools, agents and approvals

    Output folder `{out}`: **{calls:,} tool calls** ({pending:,} without a result in the capture)
    over **{streams:,} streams**, of which {subagents:,} are subagents or inline sidechains.
    Rates below are over the calls that have a result.
    """)
    return


@app.cell
def _(charts, con, plt, save):
    rates = con.sql("""
        select tool_kind, calls, error_rate, denial_rate, interruption_rate
        from tool_rates
        where calls > pending_calls
        order by calls desc
    """).pl()
    kinds = [f"{k}\n({n:,} calls)" for k, n in zip(rates["tool_kind"], rates["calls"])]
    fig_rates, ax_rates = plt.subplots(figsize=(9, 4))
    width = 0.27
    xs = range(len(kinds))
    for offset, column, label in ((-width, "error_rate", "error"), (0, "denial_rate", "denied"),
                                  (width, "interruption_rate", "interrupted or cancelled")):
        ax_rates.bar([x + offset for x in xs], [100 * (v or 0) for v in rates[column]], width, label=label)
    ax_rates.set_xticks(list(xs), kinds, fontsize="small")
    ax_rates.set_ylabel("% of calls with a result")
    ax_rates.set_title("Tool outcomes by kind")
    ax_rates.legend(frameon=False)
    ax_rates.spines[["top", "right"]].set_visible(False)
    save(fig_rates, charts, "tool_error_rates")
    return


@app.cell
def _(con, mo):
    mo.vstack([
        mo.md("## Tools with the most errors"),
        con.sql("""
            select tool_name, tool_kind, count(*) as calls,
                   count(*) filter (where status = 'error') as errors,
                   round(count(*) filter (where status = 'error') / nullif(count(*) filter (where status <> 'pending'), 0), 3)
                       as error_rate
            from tool_calls
            group by all
            order by errors desc, calls desc
            limit 15
        """).pl(),
    ])
    return


@app.cell
def _(charts, con, plt, save):
    share = con.sql("""
        select root_session_key, total_tokens, subagent_tokens
        from subagent_share
        where total_tokens > 0
        order by total_tokens desc
        limit 20
    """).pl()
    labels = [k[:8] for k in share["root_session_key"]]
    main = [(t - s) / 1e6 for t, s in zip(share["total_tokens"], share["subagent_tokens"])]
    sub = [s / 1e6 for s in share["subagent_tokens"]]
    fig_share, ax_share = plt.subplots(figsize=(9, 4))
    ax_share.bar(labels, main, label="main session")
    ax_share.bar(labels, sub, bottom=main, label="subagents and sidechains")
    ax_share.set_ylabel("million tokens")
    ax_share.set_title("Subagent share of tokens, the 20 largest sessions")
    ax_share.tick_params(axis="x", labelrotation=60, labelsize="small")
    ax_share.legend(frameon=False)
    ax_share.spines[["top", "right"]].set_visible(False)
    save(fig_share, charts, "subagent_share")
    return


@app.cell
def _(con, mo):
    overall = con.sql("""
        select sum(subagent_tokens) / nullif(sum(total_tokens), 0) as token_share,
               sum(subagent_cost_usd) / nullif(sum(cost_usd), 0) as cost_share
        from subagent_share
    """).fetchall()[0]
    mo.md(
        f"Over the whole output, subagents and sidechains spent **{(overall[0] or 0):.0%} of the tokens** "
        f"and **{(overall[1] or 0):.0%} of the priced cost**."
    )
    return


@app.cell
def _(con, mo):
    mo.vstack([
        mo.md("""
        ## Approvals by decider

        Claude Code records a permission decision on some tool results (`permissionDecision`):
        who decided (policy, user, hook, classifier) and what. Older transcripts record a person's
        rejection only in the result's text (evidence `text_marker`).
        """),
        con.sql("select * from approvals").pl(),
        mo.md("## Hook failures"),
        con.sql("select * from hook_failures limit 20").pl(),
        mo.md("## Compactions"),
        con.sql("""
            select stream_kind, count(*) as streams,
                   count(*) filter (where compactions > 0) as compacted_streams,
                   sum(full_compactions) as full, sum(micro_compactions) as micro, sum(prunes) as prunes
            from compactions_per_session
            group by stream_kind
            order by streams desc
        """).pl(),
    ])
    return


if __name__ == "__main__":
    app.run()
