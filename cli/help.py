"""Plain help text: `FILE`, `--max-tokens N`, `--format table|json`, `[default: …]`.

typer 0.29 writes the Python type after each parameter (`FILE <str>`,
`--max-tokens <int range>`, `-s <list[str]>`) and braces a required argument
in the usage line (`{FILE}`). A user reads the metavar the README uses
instead: N for a whole number, F for a fraction, FILE for a path, the choices
for a choice, and the option's own metavar where one is given.

A default is written one way, `[default: …]` after the help: the value typer
shows, or, for an option whose default lives in the settings (declared None so
that a config file can set it), the text given as its ``show_default``.

The long helps (`run`, `batch`, `config show`) group their options in panels
(typer's ``rich_help_panel``, which typer's plain output ignores), in the order
of :data:`PANELS`: the budget and the output first, the advanced options after.
"""

from __future__ import annotations

from typing import Any, get_args

import typer.core

BUDGET = "Budget"
OUTPUT = "Output"
STRATEGIES = "What is removed and what is kept"
SUMMARIZER = "Summarizer"
INPUT = "Input"
COUNTING = "Counting"
BATCH = "Batch runs"
GRAPH = "Working graph"
OTHER = "Other options"
PANELS = (BUDGET, OUTPUT, BATCH, STRATEGIES, SUMMARIZER, INPUT, COUNTING, GRAPH, OTHER)


def _metavar(option: Any) -> str:
    desc = option.type_descriptor
    if desc.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())
    if desc.is_path:
        return {"dir": "DIR", "file": "FILE"}.get(desc.path_type, "PATH")
    annotation = desc.annotation
    if desc.is_list:
        annotation = (get_args(annotation) or (str,))[0]
    if annotation is int:
        return "N"
    if annotation is float:
        return "F"
    return "TEXT"


class PlainOption(typer.core.TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        return self.metavar if self.metavar is not None else _metavar(self)

    def _get_number_range_help_str(self) -> str | None:
        return None  # the help text says the range in words; "[0.0<=x<=1.0]" only widened the column

    def _get_default_string(self, *, ctx: Any, show_default_is_str: bool, default_value: Any) -> str:
        if show_default_is_str:
            return str(self.show_default)  # "[default: 0.8]", as for a default typer knows, not "[default: (0.8)]"
        return super()._get_default_string(ctx=ctx, show_default_is_str=False, default_value=default_value)


class PlainArgument(typer.core.TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None  # the metavar (FILE, SNAPSHOT) says it

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if not self.required:
            name = f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


class PanelledCommand(typer.core.TyperCommand):
    """A command whose options are listed in panels (:data:`PANELS`), for a help too long for one list."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {panel: [] for panel in PANELS}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panels.setdefault(getattr(param, "rich_help_panel", None) or OTHER, []).append(record)
        for title, records in [("Arguments", arguments), *panels.items()]:
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)


def plain_help(command: Any) -> None:
    """Give every parameter under ``command`` (subcommands included) the plain display."""
    for param in getattr(command, "params", ()):
        if type(param) is typer.core.TyperOption:
            param.__class__ = PlainOption
        elif type(param) is typer.core.TyperArgument:
            param.__class__ = PlainArgument
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
