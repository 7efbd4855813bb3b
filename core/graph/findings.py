"""What validation finds: one Finding per problem or warning, each with its JSON path."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from core.errors import GraphError
from core.io import jsonio

if TYPE_CHECKING:
    from core.graph.model import GraphSnapshot

PathPart = str | int
Severity = Literal["error", "warning"]

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*\Z")


def json_path(parts: Iterable[PathPart]) -> str:
    """`("nodes", 3, "id")` -> `$.nodes[3].id`; keys that are not identifiers are quoted."""
    text = "$"
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.match(part):
            text += f".{part}"
        else:
            text += "[" + jsonio.dumps(part).decode() + "]"
    return text


def json_pointer(parts: Iterable[PathPart]) -> str:
    """`("nodes", 3, "id")` -> `/nodes/3/id` (RFC 6901; the whole document is ``""``)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def one_line(text: str) -> str:
    """Line breaks become spaces (ids are quoted with repr, so they hold none)."""
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _sort_key(parts: tuple[PathPart, ...]) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, part) if isinstance(part, int) else (1, part) for part in parts)


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (severity ``error``) or warning, located by its JSON path.

    ``line`` and ``column`` are only known for malformed JSON.
    """

    code: str
    message: str
    parts: tuple[PathPart, ...] = ()
    fix: str | None = None
    severity: Severity = "error"
    line: int | None = None
    column: int | None = None

    @property
    def path(self) -> str:
        return json_path(self.parts)

    @property
    def pointer(self) -> str:
        return json_pointer(self.parts)

    def describe(self) -> str:
        """`$.relationships[3].weight: non-finite weight NaN (use a finite number)`."""
        if self.line is not None:
            where = (
                f"line {self.line}, column {self.column}" if self.column else f"line {self.line}"
            )
            text = f"{where}: {self.message}"
        else:
            text = f"{self.path}: {self.message}"
        if self.fix:
            text += f" ({self.fix})"
        return one_line(text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "code": self.code,
            "path": self.path,
            "pointer": self.pointer,
            "message": self.message,
            "fix": self.fix,
            "line": self.line,
            "column": self.column,
        }


def sort_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Document order (arrays by index), stable within one location."""
    return tuple(sorted(findings, key=lambda finding: _sort_key(finding.parts)))


@dataclass(frozen=True)
class ValidationResult:
    """Every problem and warning of one snapshot; ``snapshot`` is set only when it is valid."""

    source: str | None
    problems: tuple[Finding, ...]
    warnings: tuple[Finding, ...] = ()
    snapshot: GraphSnapshot | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def findings(self, *, warnings: bool = True) -> tuple[Finding, ...]:
        """Problems and (optionally) warnings, in document order."""
        return sort_findings(self.problems + (self.warnings if warnings else ()))

    def to_dict(self) -> dict[str, Any]:
        counts = None
        if self.snapshot is not None:
            counts = {
                "nodes": len(self.snapshot.nodes),
                "relationships": len(self.snapshot.relationships),
            }
        return {
            "file": self.source,
            "valid": self.ok,
            "problems": [finding.to_dict() for finding in self.problems],
            "warnings": [finding.to_dict() for finding in self.warnings],
            "counts": counts,
        }

    def raise_for_problems(self, *, action: str = "") -> None:
        """Raise GraphError naming the first problem and how many others there are."""
        if self.ok:
            return
        raise invalid_snapshot_error(self.problems, source=self.source, action=action)


def invalid_snapshot_error(
    problems: tuple[Finding, ...], *, source: str | None, action: str = ""
) -> GraphError:
    first = problems[0]
    what = f"{first.path}: {first.message}" if first.line is None else first.message
    if action:
        what = f"{action}: {what}"
    others = len(problems) - 1
    fix = first.fix or ""
    if others:
        noun = "problem" if others == 1 else "problems"
        what += f" (and {others} more {noun})"
        listing = "`compact graph validate FILE` lists them all"
        fix = f"{fix}; {listing}" if fix else listing
    return GraphError(
        what,
        path=source,
        line=first.line,
        column=first.column,
        fix=fix or None,
    )
