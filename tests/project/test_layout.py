"""The layout the architecture promises: the pipeline asks the registry for sources and formats and
imports none itself; the orchestration's functions stay short."""

from __future__ import annotations

import ast
from pathlib import Path
from conftest import ROOT

PIPELINE = ROOT / "batch" / "pipeline.py"


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_the_pipeline_imports_no_source_or_format_but_the_registry():
    names = imported(PIPELINE)
    assert "batch.sources.registry" in names
    concrete = {n for n in names if n.startswith(("batch.formats", "batch.sources"))}
    assert concrete <= {"batch.sources", "batch.sources.registry", "batch.sources.base", "batch.sources.base.Unit",
                        "batch.sources.base.batches"}, concrete


def test_no_function_of_the_pipeline_is_longer_than_a_screen():
    tree = ast.parse(PIPELINE.read_text())
    long = {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 80}
    assert long == {}


def test_the_final_stage_runs_exactly_the_files_of_sql_final():
    from batch import sql
    from batch.run.finalize import MANIFEST_RELATIONS, SOURCE_LOSSES
    from batch.schema import TABLES
    from batch.schema.work import WORK_SCHEMAS

    targets = [t.name for t in TABLES if t.stage == "final" and t.name in sql.names()] + list(MANIFEST_RELATIONS)
    given = {t.name for t in TABLES if t.stage == "batch"} | (WORK_SCHEMAS.keys() - {SOURCE_LOSSES})
    steps = sql.order(targets, given=given)
    root = ROOT / "sql"
    assert sorted(steps) == sorted(p.stem for p in (root / "final").glob("*.sql"))
    assert not set(steps) & {p.stem for p in (root / "batch").rglob("*.sql")}


def test_the_batch_statements_are_in_a_folder_per_step_or_family_of_tables():
    # the decode, the records and what relates them, the session tables; the fact tables in the folder
    # of their family (batch/schema/<family>.py); the other formats' statements in theirs
    from batch import sql
    from batch.schema import activity, hooks, plans, workspace

    folder = {p.stem: p.parent.name for p in (ROOT / "sql" / "batch").rglob("*.sql")}
    assert set(folder.values()) == {"decode", "records", "sessions", "activity", "hooks", "plans", "workspace", "codex",
                                    "entire"}
    assert not list((ROOT / "sql" / "batch").glob("*.sql"))
    for module in (activity, hooks, plans, workspace):
        family = module.__name__.rsplit(".", 1)[1]
        assert {folder[t.name] for t in module.TABLES} == {family}, family
    assert {folder[n] for n in ("observations", "classify")} == {"decode"}
    assert sql.shown("parts") == "sql/batch/records/parts.sql"
