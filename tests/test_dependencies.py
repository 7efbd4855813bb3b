"""Every package the program imports is declared in pyproject.toml.

A fresh machine installs only what is declared: an import that happens to be
satisfied by another package's dependency (click came with Ray) passes here
and fails for a new user.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from tests.conftest import ROOT

LOCAL = {"cli", "core", "schemas", "tests"}


def _imports(folder: Path) -> tuple[set[str], set[str]]:
    """Top-level names imported by the modules under ``folder``: (at module level, anywhere)."""
    module_level: set[str] = set()
    anywhere: set[str] = set()
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        top = set(tree.body)
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            roots = {name.split(".")[0] for name in names} - LOCAL - set(sys.stdlib_module_names)
            anywhere |= roots
            if node in top:
                module_level |= roots
    return module_level, anywhere


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {_requirement_name(r) for r in project["dependencies"]}
    optional = {_requirement_name(r) for extra in project["optional-dependencies"].values() for r in extra}
    return required, optional


def _distributions(module: str) -> set[str]:
    return {d.lower().replace("_", "-") for d in packages_distributions().get(module, [])}


def test_every_import_of_the_program_is_a_declared_dependency() -> None:
    required, optional = _declared()
    module_level: set[str] = set()
    anywhere: set[str] = set()
    for package in ("cli", "core"):
        top, every = _imports(ROOT / package)
        module_level |= top
        anywhere |= every
    assert {"typer", "orjson"} <= module_level  # the scan sees real imports
    for module in sorted(module_level):
        dists = _distributions(module)
        assert dists & required, f"{module} is imported at module level but {sorted(dists)} is not in dependencies"
    for module in sorted(anywhere - module_level):
        dists = _distributions(module)
        assert dists & (required | optional), f"{module} is imported but {sorted(dists)} is declared nowhere"


def test_the_scan_sees_an_undeclared_import(tmp_path: Path) -> None:
    """`import click` at module level (typer 0.29 no longer brings click) is what the check must catch."""
    (tmp_path / "app.py").write_text("from __future__ import annotations\nimport click\nimport os\n")
    (tmp_path / "lazy.py").write_text("def f():\n    import ray.data\n")
    module_level, anywhere = _imports(tmp_path)
    assert module_level == {"click"}
    assert anywhere == {"click", "ray"}
    required, _ = _declared()
    assert not _distributions("click") & required
