"""The documentation a newcomer starts from names what the code holds."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT


def test_every_module_is_named_in_the_architecture():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "batch").rglob("*.py"))
    # a package's __init__ holding its docstring alone is named through its modules
    modules = [m for m in modules if not (m.endswith("/__init__.py") and _docstring_only(ROOT / m))]
    missing = [m for m in modules if f"\n{m} " not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


def _docstring_only(path: Path) -> bool:
    import ast

    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body)


def test_every_decision_record_a_comment_names_exists():
    import re

    named = set()
    for path in [*(ROOT / "batch").rglob("*.py"), *(ROOT / "sql").rglob("*.sql"), *(ROOT / "docs").rglob("*.md")]:
        named |= set(re.findall(r"decisions/(\d{3}-[a-z0-9-]+\.md)", path.read_text(encoding="utf-8")))
    assert named, "no decision record is named"
    assert not [n for n in sorted(named) if not (ROOT / "docs" / "decisions" / n).is_file()]
