"""Compare two asr-batch outputs table by table, row by row.

    python bench/compare.py BEFORE AFTER [--show 5] [--exclude TABLE.COLUMN ...]

For every table folder of either output, the work tables of `_work/` included, the rows of the columns
both versions have are compared as multisets (a 64-bit hash of each whole row, counted on both sides),
so the order of rows and of part files does not matter. Columns only one side has are named, and so
is a work table only one side has (not a difference: the output tables are what must match); `--exclude` leaves a
column out of the comparison (one that differs between any two converts, such as `sessions.source_last_read_at`). When BEFORE has `parts.native` (the block's
JSON, stored until `native_path` replaced it), every block is also rebuilt from AFTER through
`parts.native_path` and compared with it. Prints one line per table and exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

# manifest.json and the catalog hold timestamps and paths: not compared here
SKIP = {"asr.duckdb"}


# the work tables an incremental re-run reuses (OUT/_work/<table>/), compared as `_work/<table>`
WORK = "_work"


def tables(out: Path) -> dict[str, str]:
    folders = [p for p in sorted(out.iterdir()) if p.is_dir() and p.name not in SKIP and p.name != WORK]
    if (out / WORK).is_dir():
        folders += [p for p in sorted((out / WORK).iterdir()) if p.is_dir()]
    return {
        str(p.relative_to(out)): str(p / "*.parquet")
        for p in folders
        if any(p.glob("*.parquet"))
    }


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def compare_table(
    con: duckdb.DuckDBPyConnection, name: str, before: str, after: str, show: int, exclude: frozenset[str] = frozenset(),
) -> bool:
    cols_b = [c for c in con.execute("describe select * from read_parquet($g)", {"g": before}).fetchall()]
    cols_a = [c for c in con.execute("describe select * from read_parquet($g)", {"g": after}).fetchall()]
    names_b, names_a = [c[0] for c in cols_b], [c[0] for c in cols_a]
    skipped = [c for c in names_b if f"{name}.{c}" in exclude]
    names_b = [c for c in names_b if c not in skipped]
    names_a = [c for c in names_a if f"{name}.{c}" not in exclude]
    common = [c for c in names_b if c in names_a]
    only_b = [c for c in names_b if c not in names_a]
    only_a = [c for c in names_a if c not in names_b]
    select = ", ".join(quote(c) for c in common)
    con.execute(
        f"""
        create or replace temp table diff as
        with b as (select hash(t) as h from (select {select} from read_parquet($b, union_by_name=true)) as t),
             a as (select hash(t) as h from (select {select} from read_parquet($a, union_by_name=true)) as t),
             cb as (select h, count(*) as n from b group by h),
             ca as (select h, count(*) as n from a group by h)
        select h, coalesce(cb.n, 0) as n_before, coalesce(ca.n, 0) as n_after
        from cb full join ca using (h)
        where coalesce(cb.n, 0) <> coalesce(ca.n, 0)
        """,
        {"b": before, "a": after},
    )
    rows_b = con.execute("select count(*) from read_parquet($g)", {"g": before}).fetchone()[0]
    rows_a = con.execute("select count(*) from read_parquet($g)", {"g": after}).fetchone()[0]
    only_before, only_after = con.execute(
        "select coalesce(sum(greatest(n_before - n_after, 0)), 0), coalesce(sum(greatest(n_after - n_before, 0)), 0) from diff"
    ).fetchone()
    same = only_before == 0 and only_after == 0
    note = ""
    if only_b or only_a:
        note = f"  (compared without: before only {only_b or '-'}, after only {only_a or '-'})"
    if skipped:
        note += f"  (excluded: {', '.join(skipped)})"
    print(f"{'same' if same else 'DIFF':4}  {name:26} {rows_b:>10,} / {rows_a:>10,} rows;"
          f" only before {only_before:,}, only after {only_after:,}{note}")
    if not same and show:
        for side, glob, col in (("before", before, "n_before"), ("after", after, "n_after")):
            sample = con.execute(
                f"""select * from (select hash(t) as h, t from (select {select} from read_parquet($g, union_by_name=true)) as t)
                    where h in (select h from diff where {col} > (n_before + n_after - {col})) limit {int(show)}""",
                {"g": glob},
            ).fetchall()
            for _, row in sample:
                print(f"      {side}: {str(row)[:400]}")
    return same


def compare_part_natives(con: duckdb.DuckDBPyConnection, before: Path, after: Path) -> bool:
    """Rebuild every block's JSON from AFTER's native_path and compare it with BEFORE's parts.native."""
    g = {k: str(v) for k, v in {
        "bp": before / "parts" / "*.parquet", "ap": after / "parts" / "*.parquet",
        "al": after / "source_lines" / "*.parquet", "ar": after / "records" / "*.parquet",
    }.items()}
    con.execute(
        """
        create or replace temp table rebuilt as
        with lines as (
            select l.source_file, l.line, l.sub, coalesce(l.native, r.native) as object,
            from read_parquet($al) as l
            left join read_parquet($ar) as r using (record_id)
            where l.status in ('mapped', 'folded', 'recovered')
        ),
        blocks as (
            select p.record_id, p.part_index, p.part_type, p.native_path, json_extract(l.object, p.native_path) as block,
            from read_parquet($ap) as p
            join lines as l on l.source_file = p.source_file and l.line = p.source_line and l.sub is not distinct from p.source_sub
        )
        select
            record_id, part_index,
            -- a string content, a system line's string, a hook's context string: the text block they are read as
            case when json_type(block) = 'VARCHAR' then json_object('type', 'text', 'text', block ->> '$')::varchar
                else block::varchar end as native,
        from blocks
        """,
        {k: g[k] for k in ("ap", "al", "ar")},
    )
    missing, differ, total = con.execute(
        """
        select count(*) filter (where r.record_id is null), count(*) filter (where r.native is distinct from b.native), count(*)
        from read_parquet($bp) as b
        left join rebuilt as r using (record_id, part_index)
        """,
        {"bp": g["bp"]},
    ).fetchone()
    extra = con.execute("select count(*) - count(distinct (record_id, part_index)) from rebuilt").fetchone()[0]
    same = missing == 0 and differ == 0 and extra == 0
    print(f"{'same' if same else 'DIFF':4}  parts.native from native_path: {total:,} blocks, {missing:,} not found,"
          f" {extra:,} found twice, {differ:,} differ")
    return same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--show", type=int, default=3, help="rows to print per side of a table that differs")
    ap.add_argument("--exclude", action="append", default=[], metavar="TABLE.COLUMN",
                    help="leave this column out of the comparison (repeatable)")
    args = ap.parse_args()
    con = duckdb.connect()
    con.execute("set preserve_insertion_order = false")
    tb, ta = tables(args.before), tables(args.after)
    ok = True
    for name in sorted(tb.keys() | ta.keys()):
        if name not in tb or name not in ta:
            side = "before" if name in tb else "after"
            if name.startswith(f"{WORK}/"):  # an intermediate one version writes and the other does not
                print(f"note  {name:26} only in {side} (a work table, not an output table)")
                continue
            print(f"DIFF  {name:26} only in {side}")
            ok = False
            continue
        ok &= compare_table(con, name, tb[name], ta[name], args.show, frozenset(args.exclude))
    if "parts" in tb and "parts" in ta and "native" in [c[0] for c in con.execute(
            "describe select * from read_parquet($g)", {"g": tb["parts"]}).fetchall()] and "native_path" in [
            c[0] for c in con.execute("describe select * from read_parquet($g)", {"g": ta["parts"]}).fetchall()]:
        ok &= compare_part_natives(con, args.before, args.after)
    print("identical" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
