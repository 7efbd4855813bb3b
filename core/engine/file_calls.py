"""What a tool call does to a file: reads it (and which part) or changes it.

The read and change tools of the agents whose logs compact reads are known: Claude
Code ``Read``/``Edit``/``Write``, OpenAI-style ``read_file``/``edit_file``, pi
``read``/``edit``/``write``, SWE-agent/OpenHands ``str_replace_editor`` (``view``
reads, the other commands change), Gemini CLI ``read_file``/``replace``, Codex
``apply_patch`` and ``shell`` running ``cat``/``nl``/``sed -n``/``head``/``tail``
on one file (also inside ``/bin/bash -lc '...'``, the command line ``codex exec --json`` prints), and
the ``file_change`` calls read from ``codex exec --json`` streams (``{"changes": [{path, kind}]}``). Deduplicating reads, the summary's file lists and its lines all ask here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from core.messages import call_arguments, call_name

# Argument names agents use for the file a read targets, tried after `path_arg`.
PATH_ARGUMENTS = ("path", "file_path", "absolute_path", "filename", "file", "notebook_path")
READ_TOOLS = frozenset({"Read", "read_file", "read", "view", "open_file", "NotebookRead", "ReadFile", "read_many_files"})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "edit_file_tool"})
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "edit_file", "create_file",
                         "edit", "write", "replace", "apply_patch", "file_change"})
SHELL_TOOLS = frozenset({"shell", "bash", "Bash", "exec_command", "local_shell", "run_shell_command", "run_shell"})
# Tools whose output is other files' text: matches of a search, a listing.
SEARCH_TOOLS = frozenset({"Grep", "Glob", "LS", "search", "grep", "grep_search", "search_files", "find_files",
                          "list_dir", "list_directory", "glob", "search_file_content"})
# Shell commands that print files' text (a diff, matches, a file).
_QUOTING_COMMANDS = ("git diff", "git show", "git log", "grep ", "rg ", "cat ", "sed ", "head ", "tail ", "nl ",
                     "less ", "bat ", "find ", "ls ")
# Arguments that say which part of a file was read: reads of different parts do not supersede each other.
RANGE_ARGUMENTS = ("offset", "limit", "view_range", "start_line", "end_line", "line_range")
_SHELL_READERS = ("cat", "nl", "head", "tail", "sed", "bat", "less")
_SHELL_WRAPPER = re.compile(r"\s*(?:/usr)?(?:/bin/)?(?:ba|z)?sh\s+-l?c\s")  # `/bin/bash -lc SCRIPT`
_SHELLS = ("bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash", "/usr/bin/zsh")
_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+)$", re.MULTILINE)


def argument_path(arguments: Mapping[str, Any], path_arg: str = "path") -> str | None:
    """The file a call's arguments name: ``path_arg``, then the names agents use (the first non-empty string)."""
    for key in (path_arg, *PATH_ARGUMENTS):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _script(command: str) -> str:
    """The script of a ``/bin/bash -lc 'SCRIPT'`` command line, else the command line itself."""
    if not _SHELL_WRAPPER.match(command):
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    return words[2] if len(words) == 3 else command


def _shell_words(command: Any) -> list[str]:
    """The words of a command: a list as it is, or the script a list runs through ``bash -lc``; a
    command line (its ``/bin/bash -lc`` wrapper already taken off) split, unless it is a pipeline."""
    if isinstance(command, list):
        words = [str(w) for w in command]
        if len(words) >= 3 and words[0] in _SHELLS and words[1] in ("-lc", "-c"):
            command = _script(words[2])
        else:
            return words
    if not isinstance(command, str):
        return []
    if any(sep in command for sep in ("|", ";", "&&", ">", "$(", "`")):
        return []  # a pipeline or several commands: not a plain read of one file
    try:
        return shlex.split(command)
    except ValueError:
        return []


def shell_read(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """(path, range) when a shell command only prints one file (``cat f``, ``sed -n 1,80p f``, ...)."""
    command = arguments.get("command", arguments.get("cmd"))
    if isinstance(command, str):
        command = _script(command)
        if not command.lstrip().startswith(_SHELL_READERS):
            return None  # not a reader: no need to split it (shlex is slow, and this runs on every command)
    words = _shell_words(command)
    if not words or words[0] not in _SHELL_READERS:
        return None
    files = [w for w in words[1:] if not w.startswith("-") and not re.fullmatch(r"[\d,]+p?|'.*'", w)]
    if words[0] == "sed" and (len(words) < 4 or words[1] != "-n"):
        return None
    if len(files) != 1:
        return None
    return files[0], " ".join(w for w in words if w != files[0])


# ("read" | "write", path, the part read): what one tool call does to one file.
FileCall = tuple[str, str, str]


def classify(call: Mapping[str, Any], path_arg: str = "path", only: str = "") -> FileCall | None:
    """("read" | "write", path, range) for a call that reads or changes one file, else None."""
    name = call_name(call)
    arguments = call_arguments(call)
    if only:
        if name != only:
            return None
        path = argument_path(arguments, path_arg)
        return ("read", path, _range(arguments)) if path else None
    if name in READ_TOOLS:
        path = argument_path(arguments, path_arg)
        return ("read", path, _range(arguments)) if path else None
    if name in EDITOR_TOOLS:
        path = argument_path(arguments, path_arg)
        if not path:
            return None
        return ("read", path, _range(arguments)) if arguments.get("command") == "view" else ("write", path, "")
    if name in WRITE_TOOLS:
        path = argument_path(arguments, path_arg)
        if path is None:
            files = patch_files(call)
            path = files[0] if len(files) == 1 else None
        return ("write", path, "") if path else None
    if name in SHELL_TOOLS:
        read = shell_read(arguments)
        return ("read", read[0], read[1]) if read else None
    return None


def patch_text(call: Mapping[str, Any]) -> str:
    """The patch of an apply_patch call: Codex's raw input, or an ``input`` argument; else ""."""
    function = call.get("function")
    raw = function.get("arguments") if isinstance(function, Mapping) else None
    if isinstance(raw, str) and raw.lstrip().startswith("*** Begin Patch"):
        return raw
    text = call_arguments(call).get("input")
    return text if isinstance(text, str) and "*** Begin Patch" in text else ""


def patch_files(call: Mapping[str, Any]) -> list[str]:
    """The files an apply_patch (or codex exec ``file_change``) call adds, updates or deletes, in order."""
    return list(patch_changes(call))


def patch_changes(call: Mapping[str, Any]) -> dict[str, bool]:
    """The files an apply_patch (or codex exec ``file_change``) call touches, in order, each with
    whether the call gives it whole: a patch's ``*** Add File`` (its content) or ``*** Delete File``.
    A file_change lists paths only, no content: never whole."""
    name = call_name(call)
    if name == "file_change":
        changes = call_arguments(call).get("changes")
        listed = changes if isinstance(changes, list) else []
        return dict.fromkeys((c["path"] for c in listed if isinstance(c, Mapping) and isinstance(c.get("path"), str)), False)
    if name != "apply_patch":
        return {}
    files: dict[str, bool] = {}
    for kind, found in _PATCH_FILE.findall(patch_text(call)):
        path = found.strip()
        files[path] = files.get(path, False) or kind != "Update"
    return files


def _range(arguments: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={arguments[k]}" for k in RANGE_ARGUMENTS if arguments.get(k) is not None)


def quotes_files(call: Mapping[str, Any]) -> bool:
    """The call's output is files' text (a read, a search, a diff): an error line inside it is
    the files' (a docstring's "KeyError: ...", a test's expected message), not the call's."""
    name = call_name(call)
    if name in SEARCH_TOOLS:
        return True
    found = classify(call)
    if found is not None:
        return found[0] == "read"
    if name not in SHELL_TOOLS:
        return False
    return shell_command(call_arguments(call)).lstrip().startswith(_QUOTING_COMMANDS)


def shell_command(arguments: Mapping[str, Any]) -> str:
    """A shell call's command line: its ``command``/``cmd`` string, or the script of a
    ``["bash", "-lc", SCRIPT]`` list (Codex), else the list's words joined."""
    command = arguments.get("command", arguments.get("cmd", ""))
    if isinstance(command, list):
        words = [str(w) for w in command]
        return words[2] if len(words) >= 3 and words[1] in ("-lc", "-c") else " ".join(words)
    return _script(command) if isinstance(command, str) else str(command)
