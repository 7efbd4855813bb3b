"""`--help` reads the same everywhere: what each option takes, one way of giving a default,
the common options first, and command descriptions that end where their sentence ends.

Each test reads the help as a user sees it, at a fixed 80-column terminal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.app import app

WIDTH = 80


def help_of(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=WIDTH, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def command_paths(*, groups_only: bool = False) -> list[tuple[str, ...]]:
    """Every command and group of `compact` (or only the groups), as the words that name it."""
    import typer.main

    paths: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is not None or not groups_only:
            paths.append(path)
        for name, sub in (subcommands or {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return paths


COMMANDS = command_paths()
GROUPS = command_paths(groups_only=True)


@dataclass(frozen=True)
class Entry:
    """One line of a help section (an option, an argument or a subcommand), its wrapped lines joined."""

    section: str
    name: str
    text: str

    def names(self) -> set[str]:
        return {word.rstrip(",") for word in self.name.split() if word.startswith("-")}


def entries(help_text: str) -> list[Entry]:
    """The sections of a help page, entry by entry: `  NAME  text` with the text wrapped under it."""
    found: list[Entry] = []
    section = ""
    for line in help_text.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
        elif section and re.match(r"^  \S", line):
            name, _, text = line.strip().partition("  ")
            found.append(Entry(section, name.strip(), text.strip()))
        elif section and re.match(r"^   +\S", line) and found:
            last = found[-1]
            joint = "" if re.search(r"\w-$", last.text) else " "  # a word wrapped at its hyphen: gemini-|stream
            found[-1] = Entry(last.section, last.name, f"{last.text}{joint}{line.strip()}".strip())
    return found


def options_of(help_text: str) -> list[Entry]:
    return [entry for entry in entries(help_text) if entry.name.startswith("-")]


def test_the_help_is_read_entry_by_entry() -> None:
    # The checks below must not pass on a help they fail to read.
    run = options_of(help_of("run"))
    assert len(run) > 40
    wrapped = next(e for e in run if "--summarizer" in e.names())
    assert wrapped.text.startswith("Who summarizes")
    assert len(COMMANDS) >= 15


@pytest.mark.parametrize("command", COMMANDS, ids=lambda path: " ".join(path) or "compact")
def test_every_option_says_what_it_takes(command: tuple[str, ...]) -> None:
    """A metavar names the value (FILE, N, URL, DIR, the choices), never the type TEXT."""
    for entry in options_of(help_of(*command)):
        assert "TEXT" not in entry.name.split(), (command, entry.name)


def _extras(text: str) -> tuple[str, list[str]]:
    """The help text before its trailing `[default: …; env var: …; required]`, and those items."""
    match = re.search(r"\s\[([^\[\]]*)\]$", text)
    if match is None:
        return text, []
    return text[: match.start()], match.group(1).split("; ")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda path: " ".join(path) or "compact")
def test_every_default_is_given_one_way(command: tuple[str, ...]) -> None:
    """Defaults are `[default: …]` at the end, as typer writes them, never `[0.8]` or `(default 20)` mid-text."""
    for entry in options_of(help_of(*command)):
        prose, extras = _extras(entry.text)
        for item in extras:
            assert re.fullmatch(r"(default|env var): .+|required", item), (command, entry.name, entry.text)
        unquoted = re.sub(r"'[^']*'|`[^`]*`", "", prose)  # pip install 'ray[data]' is a command, not a default
        assert not re.search(r"\[|\]", unquoted), (command, entry.name, entry.text)
        assert not re.search(r"\bdefaults?\b( is|:|\s\d)|\(default", prose, re.IGNORECASE), (
            command, entry.name, entry.text)


def test_the_defaults_shown_are_the_settings_defaults() -> None:
    """The options declared None (so that a config file can set them) show the default the settings give."""
    from core.config import MemoryConfig

    config = MemoryConfig()
    shown = {}
    for entry in options_of(help_of("config", "show")):
        _, extras = _extras(entry.text)
        for item in extras:
            if item.startswith("default: "):
                long = next(word for word in entry.name.split() if word.startswith("--"))
                shown[long] = item.removeprefix("default: ")
    assert shown == {
        "--max-fraction": str(config.max_fraction),
        "--context-window": str(config.context_window_tokens),
        "--encoder": config.encoder_name,
        "--backend": config.backend,
        "--chars-per-token": str(config.chars_per_token),
        "--framing": "framing" if config.framing else "no-framing",
        "--offload-turns": str(config.offload_turns),
        "--preset": config.preset,
        "--summarizer": f"{config.summarizer_in_use} (none under --preset seed)",
        "--api-key-env": config.api_key_env,
        "--quality-retry": "quality-retry" if config.quality_retry else "no-quality-retry",
        "--max-line-bytes": f"{config.max_line_bytes // 2**20} MiB",
    }
    assert MemoryConfig(preset="seed").summarizer_in_use is None


def test_batch_top_states_its_default_once() -> None:
    top = next(e for e in options_of(help_of("batch")) if "--top" in e.names())
    assert len(re.findall(r"default", top.text, re.IGNORECASE)) == 1, top.text
    assert top.text.endswith("[default: 20]")


def test_format_has_its_short_name_everywhere_or_nowhere() -> None:
    formats = [(command, entry) for command in COMMANDS for entry in options_of(help_of(*command))
               if "--format" in entry.names()]
    assert len(formats) >= 5
    shorts = {("-f" in entry.names()) for _, entry in formats}
    assert shorts == {True}, [(" ".join(c), e.name) for c, e in formats if "-f" not in e.names()]


def _sections(help_text: str) -> list[tuple[str, set[str]]]:
    """The option sections of a help page in order, each with the long names of its options."""
    order: list[tuple[str, set[str]]] = []
    for entry in options_of(help_text):
        if not order or order[-1][0] != entry.section:
            order.append((entry.section, set()))
        order[-1][1].update(name for name in entry.names() if name.startswith("--"))
    return order


@pytest.mark.parametrize(("command", "output"), [("run", "--output"), ("batch", "--out")])
def test_the_long_helps_lead_with_the_options_most_runs_need(command: str, output: str) -> None:
    sections = _sections(help_of(command))
    first, second = sections[0][1], sections[1][1]
    assert {"--max-tokens", "--max-messages", "--model"} <= first, sections[0]
    assert len(first) <= 8, sections[0]
    assert {output, "--report", "--dry-run"} <= second, sections[1]
    later = set().union(*(names for _, names in sections[2:]))
    assert {"--chars-per-token", "--graph-max-nodes", "--debug", "--summarizer-url"} <= later
    assert len(sections) >= 5  # the advanced options in panels of their own


def test_panels_leave_no_option_out() -> None:
    import typer.main

    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    declared = {opt for param in command.params for opt in param.opts if opt.startswith("--")}
    shown = set().union(*(names for _, names in _sections(help_of("run"))))
    assert declared <= shown, declared - shown


def _descriptions(help_text: str) -> list[Entry]:
    return [entry for entry in entries(help_text) if entry.section == "Commands"]


@pytest.mark.parametrize("group", GROUPS, ids=lambda path: " ".join(path) or "compact")
def test_command_descriptions_end_where_their_sentence_ends(group: tuple[str, ...]) -> None:
    import typer.main

    command: Any = typer.main.get_command(app)
    for name in group:
        command = command.commands[name]
    described = _descriptions(help_of(*group))
    assert len(described) == len(command.commands)
    for entry in described:
        assert entry.text.endswith(".") and not entry.text.endswith("..."), (group, entry.name, entry.text)


@pytest.mark.script_launch_mode("subprocess")
def test_the_installed_compact_help_cuts_no_description(script_runner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = script_runner.run(["compact", "--help"])
    assert result.returncode == 0, result.stderr
    described = _descriptions(result.stdout)
    assert {entry.name for entry in described} >= {"run", "count", "batch", "graph", "cache"}
    assert all(entry.text.endswith(".") and "..." not in entry.text for entry in described), described
