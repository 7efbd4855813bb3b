"""The size ceilings the code keeps, as tests, so they stop drifting between reviews.

A module of ``core/`` or ``cli/`` holds at most 500 lines, a function body at most 60, a
function outside ``cli/`` takes at most 12 parameters (a typer command declares one per
option), at most 10 pairs of places repeat six lines of each other, the README's layout map
names every module of ``core/engine/``, and no comment cites the document or issue a rule came from.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 500
MAX_BODY_LINES = 60
MAX_PARAMETERS = 12
MAX_REPEATED_PAIRS = 10  # none today: room for a few repeats not worth a helper, not for drift
REPEAT_LINES = 6

# Known excess, each at today's figure so it cannot grow (the test says when an entry can go).
MODULE_LINES_ALLOWED: dict[str, int] = {}
BODY_LINES_ALLOWED: dict[str, int] = {}

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _modules(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _functions(path: Path) -> Iterator[Function]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _body_lines(function: Function) -> int:
    """Lines from the first statement after the docstring to the function's last line."""
    body = function.body
    has_docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)
    first = body[1] if has_docstring and len(body) > 1 else body[0]
    assert function.end_lineno is not None
    return function.end_lineno - first.lineno + 1


def _parameters(function: Function) -> int:
    arguments = function.args
    return (len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
            + (arguments.vararg is not None) + (arguments.kwarg is not None))


def _over(measured: dict[str, int], ceiling: int, allowed: dict[str, int]) -> list[str]:
    """What passes its ceiling (or its allowance), and allowances no longer needed."""
    problems = [f"{key}: {value} (at most {allowed.get(key, ceiling)})"
                for key, value in sorted(measured.items()) if value > allowed.get(key, ceiling)]
    problems += [f"{key}: back under {ceiling}; remove it from the allow-list in tests/test_ceilings.py"
                 for key in sorted(allowed) if measured.get(key, 0) <= ceiling]
    return problems


def test_no_module_of_core_or_cli_is_over_500_lines() -> None:
    measured = {_name(path): len(path.read_text(encoding="utf-8").splitlines()) for path in _modules("core", "cli")}
    problems = _over(measured, MAX_MODULE_LINES, MODULE_LINES_ALLOWED)
    assert not problems, "\n".join(problems)


def test_no_function_body_in_core_or_cli_is_over_60_lines() -> None:
    measured: dict[str, int] = {}
    for path in _modules("core", "cli"):
        for function in _functions(path):
            key = f"{_name(path)}:{function.name}"
            measured[key] = max(measured.get(key, 0), _body_lines(function))
    problems = _over(measured, MAX_BODY_LINES, BODY_LINES_ALLOWED)
    assert not problems, "\n".join(problems)


def test_no_function_outside_cli_takes_more_than_12_parameters() -> None:
    measured = {f"{_name(path)}:{function.name}": _parameters(function)
                for path in _modules("core", "bench", "tests") for function in _functions(path)}
    problems = _over(measured, MAX_PARAMETERS, {})
    assert not problems, "\n".join(problems)


def test_the_readme_layout_map_names_every_engine_module() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in layout.splitlines() if "`core/engine/`" in line)
    named = set(re.findall(r"`([\w/]+\.py)`", row))
    missing = sorted(_engine_modules() - named)
    assert not missing, f"README.md's layout map does not name {', '.join(missing)} in its core/engine/ row"


def test_the_engine_package_docstring_lists_every_module() -> None:
    docstring = ast.get_docstring(ast.parse((ROOT / "core" / "engine" / "__init__.py").read_text(encoding="utf-8"))) or ""
    listed = {f"{name}.py" for name in re.findall(r"^- (\w+):", docstring, flags=re.MULTILINE)}
    missing = sorted(_engine_modules() - listed)
    assert not missing, f"core/engine/__init__.py's docstring does not list {', '.join(missing)}"


def _engine_modules() -> set[str]:
    return {path.name for path in (ROOT / "core" / "engine").glob("*.py") if path.name != "__init__.py"}


def test_no_module_of_core_or_cli_is_named_after_a_standard_library_module() -> None:
    # `from cli import inspect` beside `import inspect` reads as the standard library's.
    # (Module files only: the package core/io is left as it is.)
    shadowing = [_name(path) for path in _modules("core", "cli") if path.stem in sys.stdlib_module_names]
    assert not shadowing, f"named like a standard-library module: {', '.join(shadowing)}"


def test_no_limit_has_one_name() -> None:
    # The --unlimited mode and a budget with no trigger are the same "unlimited" in the report.
    defined = [_name(path) for path in _modules("core", "cli")
               for node in ast.parse(path.read_text(encoding="utf-8")).body
               if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "UNLIMITED" for t in node.targets)]
    assert defined == ["core/engine/budget.py"]


LONE_PUNCTUATION = re.compile(r"[()\[\]{}:;,.]*")


def _code_lines(text: str) -> list[tuple[int, str]]:
    """The lines a repeat is looked for in, with their numbers: white space folded; blank lines,
    comments, lone punctuation and import statements left out (every line of a multi-line one: the
    codecs all import the same names from core.formats.base, which no helper could fold)."""
    imports = {number for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Import | ast.ImportFrom)
               for number in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    kept = []
    for number, line in enumerate(text.splitlines(), 1):
        folded = " ".join(line.split())
        if folded and not folded.startswith("#") and not LONE_PUNCTUATION.fullmatch(folded) and number not in imports:
            kept.append((number, folded))
    return kept


def _repeated_pairs(root: Path, folders: tuple[str, ...] = ("core", "cli")) -> dict[tuple[str, str], list[str]]:
    """The pairs of files (a file with itself for two places in it) that share a run of six or more
    code lines, each with its runs as ``a.py:10-17 ~ b.py:40-47``.

    Identical text only (after folding white space): code alike but for its names is not found;
    the `duplicates` command finds that too. Windows of six lines that stand next to each other in
    both places make one run; a file pair with several runs counts once."""
    lines = {path.relative_to(root).as_posix(): _code_lines(path.read_text(encoding="utf-8"))
             for folder in folders for path in sorted((root / folder).rglob("*.py"))}
    places: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for name, kept in lines.items():
        for start in range(len(kept) - REPEAT_LINES + 1):
            places["\n".join(text for _, text in kept[start:start + REPEAT_LINES])].append((name, start))
    shared: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)
    for spots in places.values():
        for index, (first, start) in enumerate(spots):
            for second, other in spots[index + 1:]:
                shared[first, second].add((start, other))
    pairs = {}
    for (first, second), starts in sorted(shared.items()):
        runs = []
        for start, other in sorted(starts):
            if (start - 1, other - 1) in starts:
                continue  # inside a run already listed
            end = start
            while (end + 1, other + end + 1 - start) in starts:
                end += 1
            last = end + REPEAT_LINES - 1
            runs.append(f"{first}:{lines[first][start][0]}-{lines[first][last][0]} ~ "
                        f"{second}:{lines[second][other][0]}-{lines[second][other + last - start][0]}")
        pairs[first, second] = runs
    return pairs


def _too_many_repeats(root: Path, ceiling: int) -> str | None:
    pairs = _repeated_pairs(root)
    if len(pairs) <= ceiling:
        return None
    listed = "\n".join(f"  {runs[0]}" + (f" (+{len(runs) - 1} more runs)" if len(runs) > 1 else "")
                       for runs in pairs.values())
    return (f"{len(pairs)} pairs of places in core/ and cli/ repeat {REPEAT_LINES} or more lines (at most {ceiling});"
            f" fold them into one helper where the logic is the same:\n{listed}")


def test_at_most_10_pairs_of_places_in_core_and_cli_repeat_six_lines() -> None:
    problem = _too_many_repeats(ROOT, MAX_REPEATED_PAIRS)
    assert problem is None, problem


def test_the_repeat_check_names_a_planted_repeat_and_nothing_else(tmp_path: Path) -> None:
    body = [f"total = total + weights[{n}] * values[{n}]" for n in range(8)]
    (tmp_path / "core").mkdir()
    (tmp_path / "cli").mkdir()
    (tmp_path / "core" / "a.py").write_text("\n".join([
        "from core.messages import (", "    a,", "    b,", "    c,", "    d,", "    e,", "    f,", ")",
        "def first(weights, values):", "    total = 0", *("    " + line for line in body), "    return total", ""]))
    # The same lines, indented otherwise and with a comment and a blank line between them: still a repeat.
    (tmp_path / "cli" / "b.py").write_text("\n".join([
        "from core.messages import (", "    a,", "    b,", "    c,", "    d,", "    e,", "    f,", ")",
        "class Second:", "    def second(self, weights, values):", *("        " + line for line in body[:3]),
        "        # halfway", "", *("        " + line for line in body[3:]), "        return None", ""]))
    # Five lines in common are not a repeat.
    (tmp_path / "cli" / "c.py").write_text("\n".join(["def third(weights, values):", *("    " + line for line in body[:5]), ""]))
    assert _repeated_pairs(tmp_path) == {("core/a.py", "cli/b.py"): ["core/a.py:11-18 ~ cli/b.py:11-20"]}
    problem = _too_many_repeats(tmp_path, 0)
    assert problem is not None and "core/a.py:11-18 ~ cli/b.py:11-20" in problem
    assert _too_many_repeats(tmp_path, 1) is None


def test_the_engine_imports_neither_the_strategies_nor_the_configuration() -> None:
    # The strategies and the configuration build on the engine; the engine is handed what it runs.
    outside = ("core.strategies", "core.config")
    found = []
    for path in (ROOT / "core" / "engine").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{_name(path)}: {name}" for name in names if name in outside or name.startswith(
                tuple(f"{module}." for module in outside))]
    assert not found, "\n".join(sorted(set(found)))


def test_only_the_chooser_reads_how_far_a_run_goes() -> None:
    # The shares of a token budget a run aims at, fills and cuts its pinned messages to are the
    # chooser's (core/engine/fit.py): a strategy asks it, so a preset changes them in one place.
    shares = ("aim_share", "fill_share", "pinned_share")
    found = []
    for path in _modules("core", "cli"):
        if _name(path) in ("core/engine/fit.py", "core/engine/policy.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in shares:
                found.append(f"{_name(path)}:{node.lineno}: {node.attr}")
    assert not found, "\n".join(found)


# A comment that cites where a rule came from ("SPEC §4", "memory-plugin.txt", "issue 28") tells a
# newcomer to go and read something else; the comment should say why.
_CITATION = re.compile(r"\bSPEC §|\bmemory-plugin\.txt|\bcompaction-policy\.txt|\bissue[ -]\d+", re.IGNORECASE)


def test_no_comment_in_core_or_cli_cites_the_document_or_issue_a_rule_came_from() -> None:
    cited = [f"{_name(path)}:{number}: {line.strip()}" for path in _modules("core", "cli")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if _CITATION.search(line)]
    assert not cited, "\n".join(cited)


def test_the_citation_check_finds_a_planted_citation() -> None:
    assert _CITATION.search("# max_messages wins (memory-plugin.txt, \"Triggers\")")
    assert _CITATION.search('"""The budget (SPEC §4)."""') and _CITATION.search("# see issue 28")
    assert not _CITATION.search("# a strategy error never fails the run: the rest still compact")
