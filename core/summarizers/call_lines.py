"""The summary's line for one tool call and what it returned: the file it read (with what the file
defines) or changed, the command it ran and what that met, the record a lookup returned, or the error.
Each line says which tool ran on what; its priority says how soon it is left out when room is short."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.engine.file_calls import (
    PATH_ARGUMENTS,
    SHELL_TOOLS,
    FileCall,
    patch_files,
    patch_text,
    quotes_files,
    shell_command,
)
from core.messages import call_arguments, call_name, one_line, string_values
from core.summarizers.facts import call_error, contents, record_gist
from core.summarizers.statements import TOOL_SCAN_CHARS

SAY_CHARS = 220
TARGET_CHARS = 90
# Priorities: lower is kept first when the budget is short.
REQUEST, FACT, ERROR, CHANGE, READ, COMMAND, REMARK = range(7)




# Of an edit that defines nothing, the added lines naming the most (calls, fields, types) are quoted.
ADDED_LINES = 2
ADDS = "adds `"
ADDED_LINE_CHARS = 100
_CODE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*|\b[a-z]+_\w+")


def added_lines(old: str, new: str) -> list[str]:
    """The lines an edit adds (not in its old text) that name the most, in their order, at most ADDED_LINES."""
    before = {" ".join(line.split()) for line in old.splitlines()}
    found: list[tuple[int, int, str]] = []
    for index, raw in enumerate(new.splitlines()):
        line = " ".join(raw.split())
        if line in before or not 12 <= len(line) <= ADDED_LINE_CHARS * 2 or line.startswith(("//", "#", "*", "/*")):
            continue
        names = len(set(_CODE_NAME.findall(line)))
        if names:
            found.append((names, index, line))
    chosen = sorted(sorted(found, key=lambda item: -item[0])[:ADDED_LINES], key=lambda item: item[1])
    return [one_line(line, ADDED_LINE_CHARS).replace("`", "'") for _, _, line in chosen]


def argument_path(arguments: Mapping[str, Any]) -> str:
    for key in PATH_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def command_text(arguments: Mapping[str, Any]) -> str:
    return one_line(shell_command(arguments), TARGET_CHARS)


# A numbered listing's line ("   700→…", cat -n's "   700\t…"): its number is the file's line.
_NUMBERED = re.compile(r"^\s*(\d+)(?:→|\t)", re.MULTILINE)


def _read_extent(part: str, result: str, lines: int) -> str:
    """How much of the file a read returned: " lines 700-904" for a part of it (the listing's own
    numbers), else " (N lines)"."""
    numbers = _NUMBERED.findall(result) if part else []
    return f" lines {numbers[0]}-{numbers[-1]}" if numbers else f" ({lines} lines)"


def result_line(call: Mapping[str, Any], found: FileCall | None, result: str,
                    failed: bool = False) -> tuple[int, str] | None:
    """One line for a tool call and what it returned, with its priority (``failed``: the transcript marks it so)."""
    tool, arguments = call_name(call), call_arguments(call)
    path = found[1] if found is not None else argument_path(arguments)
    listing = result[:result.rfind("<system-reminder>")].rstrip("\n") if result.rstrip().endswith("</system-reminder>") else result
    lines = listing.count("\n") + (not listing.endswith("\n")) if listing else 0  # (not what the harness appended)
    result = result[:TOOL_SCAN_CHARS]  # what a tool returned can be huge: its head says enough here
    quoting = quotes_files(call)
    error = call_error(call, result)
    if failed and not error:  # an error in words of its own ("no changes were necessary")
        error = next((ln.strip() for ln in result.splitlines() if ln.strip()), "") or "failed"
    if found is not None and found[0] == "read":
        if error:
            return ERROR, f"- {tool}({path}): {one_line(error, SAY_CHARS)}"
        held = contents(path, result)
        if not held:
            return None  # the summary's "Files read" list names it
        return READ, f"- read {path}{_read_extent(found[2], result, lines)}: {held}"
    patched = patch_files(call)
    if found is not None or patched:
        path = ", ".join(patched) or path
        if error:
            return ERROR, f"- changing {path} failed: {one_line(error, SAY_CHARS)}"
        new = arguments.get("new_string", arguments.get("new_str", arguments.get("content", "")))
        if patched:  # the lines the patch adds
            new = "\n".join(line[1:] for line in patch_text(call).splitlines() if line.startswith("+"))
        held = contents(path, str(new)) if new and len(patched) <= 1 else ""
        if not held and not patched and new:
            added = added_lines(str(arguments.get("old_string", arguments.get("old_str", ""))), str(new))
            held = f"{ADDS}{'` … `'.join(added)}`" if added else ""
        if not held:
            return (CHANGE, f"- changed {path}") if len(patched) > 1 else None  # else the "Files changed" list names it
        return CHANGE, f"- changed {path}: {held}"
    if tool in SHELL_TOOLS:
        command = command_text(arguments)
        if error:
            return ERROR, f"- ran `{command}`: {one_line(error, SAY_CHARS)}"
        last = next((ln.strip() for ln in reversed(result.splitlines()) if ln.strip()), "") if result else ""
        outcome = f" → {one_line(last, 100)}" if last else ""
        return COMMAND, f"- ran `{command}`{outcome}"
    target = path or next((one_line(str(v), 60) for v in arguments.values() if isinstance(v, str) and v.strip()), "")
    if error:
        return ERROR, f"- {tool}({target}): {one_line(error, SAY_CHARS)}"
    gist = "" if quoting else record_gist(result, string_values(arguments))  # the ids the next calls pass on
    if gist:
        return COMMAND, f"- {tool}({target}) → {gist}"
    return (COMMAND, f"- {tool}({target})") if target else None  # "- TodoWrite()" would say nothing
