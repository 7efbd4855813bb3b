"""The README tells the truth: CI runs its commands, and its tables name every option."""

from __future__ import annotations

import re

from core import strategies
from tests.conftest import ROOT, documentation


def fenced_after(heading: str, text: str) -> str:
    section = text.split(f"## {heading}\n", 1)[1]
    return re.search(r"```\n(.*?)\n```", section, re.DOTALL).group(1).strip()


def test_ci_runs_the_readme_install_and_test_commands_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    install = fenced_after("Install and run", readme)
    test = fenced_after("Test", readme)
    assert install.split(" > ")[0] in ci
    assert test in ci


def test_every_option_of_the_main_command_is_documented() -> None:
    import typer.main

    from cli.app import app

    readme = documentation()
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    options = [param for param in command.params if param.param_type_name == "option"]
    assert len(options) > 10  # the check below must not pass on an empty list
    for param in options:
        assert any(f"`{opt}" in readme for opt in param.opts), param.opts


def test_every_strategy_is_documented() -> None:
    readme = (ROOT / "docs" / "strategies.md").read_text()
    for name in strategies.NAMES:
        info = strategies.get(name)
        assert f"`{name}` ({info.alias})" in readme


DOCS = ["README.md", "sample_transcripts/README.md", "bench/README.md", ".pre-commit-hooks.yaml",
        *(f"docs/{page.name}" for page in sorted((ROOT / "docs").glob("*.md")))]
DEAD = [
    "SPEC §",  # the behaviour contract is not shipped with the project
    "GRAPH_README",
    "the seed's `compress`",  # the design notes' name, which no command has
    "the seed's example",
    "memory-plugin.txt",
    "summary-buffer.txt",
    "pipx install compact-transcripts",  # not published
    "pip install 'compact-transcripts",
    "rev: v0.1.0",  # no tag exists
]


def test_the_docs_point_at_nothing_that_does_not_exist() -> None:
    for name in DOCS:
        text = (ROOT / name).read_text()
        for dead in DEAD:
            assert dead not in text, (name, dead)


def test_the_readme_example_config_reaches_its_budget(tmp_path: object) -> None:
    import json
    from pathlib import Path

    from tests.helpers import invoke

    readme = (ROOT / "docs" / "configuration.md").read_text()
    section = readme.split("## Configuration file\n", 1)[1]
    config_text = re.search(r"```toml\n(.*?)\n```", section, re.DOTALL).group(1)  # type: ignore[union-attr]
    folder = Path(str(tmp_path))
    (folder / "compact.toml").write_text(config_text)
    report = folder / "r.json"
    result = invoke(str(ROOT / "sample_transcripts" / "agent_session.jsonl"), "-c", str(folder / "compact.toml"),
                    "--report", str(report), "-o", str(folder / "out.jsonl"))
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["budget"]["limit"] == 8000
    assert data["over_budget"] is False
    assert data["after"]["tokens"] < 8000


def test_the_readme_links_every_reference_page_and_every_link_resolves() -> None:
    readme = (ROOT / "README.md").read_text()
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert len(pages) >= 5
    for page in pages:
        assert f"(docs/{page.name})" in readme, page.name
    for source in [ROOT / "README.md", *pages]:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", source.read_text()):
            assert (source.parent / target).resolve().exists(), (source.name, target)


def test_the_layout_map_matches_the_tree() -> None:
    """Every path the README's "Where is X" map names exists, and every folder of core/ is on it."""
    layout = (ROOT / "README.md").read_text().split("## Layout\n", 1)[1]
    named = set(re.findall(r"`((?:cli|core|schemas|bench|docs|sample_transcripts)/[\w/.<>]*)`", layout))
    assert len(named) >= 15
    for path in named:
        if "<" not in path:
            assert (ROOT / path).exists(), path
    folders = {p.name for p in (ROOT / "core").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders and all(f"`core/{name}/" in layout for name in folders), folders
    flat = [p for p in (ROOT / "core").glob("*.py") if p.name != "__init__.py"]
    assert len(flat) <= 10  # the folders, not a flat list, show the architecture


def _normalized(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_example_run_prints_the_prompt_cache_figure_the_readme_shows(tmp_path: object) -> None:
    """The figures under "What a run looks like" are what its command prints, not retyped ones."""
    import shlex
    from pathlib import Path

    from tests.helpers import invoke

    section = (ROOT / "README.md").read_text().split("## What a run looks like\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)\n```", section, re.DOTALL)
    command = shlex.split(blocks[0].removeprefix("$ "))
    shown = _normalized(next(block for block in blocks if block.startswith("prompt cache:")))
    assert command[0] == "compact" and "-o" in command and "--table" in command
    args = command[1:]
    args[args.index("-o") + 1] = str(Path(str(tmp_path)) / "small.jsonl")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    printed = re.search(r"prompt cache: .*? processed anew", _normalized(result.stderr))
    assert printed is not None, result.stderr
    assert printed.group(0) == shown


def test_the_readme_first_commands_leave_nothing_in_the_checkout() -> None:
    """The install-and-run command and the example run write outside the checkout (CI: into its scratch folder)."""
    from pathlib import Path

    readme = (ROOT / "README.md").read_text()
    install = fenced_after("Install and run", readme)
    example = fenced_after("What a run looks like", readme)
    targets = [install.rsplit(" > ", 1)[1], example.split(" -o ", 1)[1].split()[0]]
    for target in map(Path, targets):
        assert target.is_absolute() and not target.resolve().is_relative_to(ROOT), target


def _sample_rows() -> dict[str, str]:
    """The rows of sample_transcripts/README.md's table, by file name."""
    text = (ROOT / "sample_transcripts" / "README.md").read_text()
    return {match.group(1): match.group(0) for match in re.finditer(r"^\| `([\w/.]+)` \|.*$", text, re.MULTILINE)}


def test_the_sample_table_gives_the_counts_compact_count_reports() -> None:
    import json

    from tests.helpers import invoke

    rows = _sample_rows()
    assert len(rows) >= 10
    counted = 0
    for name, row in rows.items():
        messages, tokens = (cell.strip().replace(",", "") for cell in row.split("|")[2:4])
        if not tokens.isdigit():
            continue  # a file that fails to read has no count
        result = invoke("count", str(ROOT / "sample_transcripts" / name), "--format", "json")
        assert result.exit_code == 0, result.output
        before = json.loads(result.stdout)["before"]
        assert (before["messages"], before["tokens"]) == (int(messages), int(tokens)), name
        counted += 1
    assert counted >= 5


def shape(jsonl: str) -> str:
    import json

    return " ".join(json.loads(line)["role"][0].upper() for line in jsonl.splitlines() if line.strip())


def test_the_seed_example_gives_the_shapes_the_sample_readme_names() -> None:
    """`S A U S` is the seed's rules (--preset seed); the default preset keeps the first request."""
    import shlex

    from tests.helpers import invoke

    row = _sample_rows()["seed_example.jsonl"]
    (command,) = re.findall(r"`(compact [^`]*)`", row)
    given, seeded, default = re.findall(r"`([SUAT](?: [SUAT])+)`", row)
    args = shlex.split(command)[1:]
    assert shape((ROOT / args[0]).read_text()) == given
    assert "--preset seed" in command
    result = invoke(str(ROOT / args[0]), *args[1:])
    assert result.exit_code == 0, result.output
    assert shape(result.stdout) == seeded
    without = shlex.split(command.replace(" --preset seed", ""))[1:]
    result = invoke(str(ROOT / without[0]), *without[1:])
    assert result.exit_code == 0, result.output
    assert shape(result.stdout) == default
