"""The package's imports point one way along the pipeline: a stage never imports a later one."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tensortune"

# Earlier stages first; a module may import its own stage or any earlier one.
ORDER = [
    "errors",
    "version",
    "dtype",
    "memory",
    "te",
    "ops",
    "target",
    "workload",
    "schedule",
    "ir",
    "lower",
    "codegen",
    "build",
    "backend",
    "pipeline",
    "measure",
    "database",
    "space",
    "cost_model",
    "search",
    "fleet",
    "tuning",
    "dataset",
    "graph",
    "cli",
    "__main__",
]


def stage_of(module: str) -> str:
    """'tensortune.lower.bounds' -> 'lower'; the package root itself is the last stage."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> set[str]:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = (
                [f"{target}.{a.name}" for a in node.names] if target == "tensortune" else [target]
            )
            found.update(n for n in names if n.startswith("tensortune"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tensortune"))
    return found


def test_every_stage_is_known():
    stages = {
        p.stem if p.is_file() else p.name for p in PACKAGE.iterdir() if not p.name.startswith("_")
    }
    stages = {s for s in stages if s != "py" and not s.endswith(".pyc")}
    assert stages <= set(ORDER) | {"__pycache__"}, stages - set(ORDER)


def test_imports_point_down_the_pipeline():
    rank = {name: i for i, name in enumerate(ORDER)}
    bad = []
    for path in PACKAGE.rglob("*.py"):
        mine = stage_of(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        if mine == "__init__":
            continue
        for imported in imports_of(path):
            theirs = stage_of(imported)
            if theirs == "__init__" or rank[theirs] > rank[mine]:
                bad.append(f"{path.relative_to(PACKAGE.parent)} imports {imported}")
    assert not bad, "upward imports:\n" + "\n".join(bad)
