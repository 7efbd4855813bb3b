"""Plain help text: `FILE`, `--max-tokens N`, `--format table|json`.

typer 0.29 writes the Python type after each parameter (`FILE <str>`,
`--max-tokens <int range>`, `-s <list[str]>`) and braces a required argument
in the usage line (`{FILE}`). A user reads the metavar the README uses
instead: N for a whole number, F for a fraction, FILE for a path, the choices
for a choice, and the option's own metavar where one is given.
"""

from __future__ import annotations

from typing import Any, get_args

import typer.core


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


class PlainArgument(typer.core.TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None  # the metavar (FILE, SNAPSHOT) says it

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if not self.required:
            name = f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


def plain_help(command: Any) -> None:
    """Give every parameter under ``command`` (subcommands included) the plain display."""
    for param in getattr(command, "params", ()):
        if type(param) is typer.core.TyperOption:
            param.__class__ = PlainOption
        elif type(param) is typer.core.TyperArgument:
            param.__class__ = PlainArgument
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
