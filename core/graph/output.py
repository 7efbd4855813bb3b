"""Validation results as text lines, GitHub workflow annotations or one JSON document.

Pure formatting: the CLI writes what these return.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from core.graph.findings import Finding, ValidationResult, one_line

OutputFormat = Literal["text", "json", "github"]
OUTPUT_FORMATS: tuple[str, ...] = ("text", "json", "github")
VALIDATION_VERSION = 1


def text_line(source: str | None, finding: Finding) -> str:
    """`FILE: $.relationships[3].weight: non-finite weight NaN (use a finite number ...)`.

    Warnings say ``warning:`` after the path; malformed JSON gives
    `FILE:LINE:COLUMN: malformed JSON: ...`.
    """
    where = source or "<snapshot>"
    body = finding.message + (f" ({finding.fix})" if finding.fix else "")
    if finding.severity == "warning":
        body = "warning: " + body
    if finding.line is not None:
        head = f"{where}:{finding.line}" + (f":{finding.column}" if finding.column else "")
        return one_line(f"{head}: {body}")
    return one_line(f"{where}: {finding.path}: {body}")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_line(source: str | None, finding: Finding, location: tuple[int, int] | None = None) -> str:
    """`::error file=F,line=12,col=7,title=compact graph: duplicate-node-id::$.nodes[3].id: ...`.

    ``location`` is where the finding's JSON path sits in the file (core.graph.locate), so the
    annotation attaches to that line of the pull request; malformed JSON carries its own.
    """
    properties = [f"file={_escape_property(source or '')}"]
    line, column = (finding.line, finding.column) if finding.line is not None else location or (None, None)
    if line is not None:
        properties.append(f"line={line}")
        if column:
            properties.append(f"col={column}")
    properties.append(f"title={_escape_property('compact graph ' + finding.code)}")
    body = finding.describe()
    return f"::{finding.severity} {','.join(properties)}::{_escape_data(body)}"


def finding_lines(
    results: Iterable[ValidationResult], fmt: OutputFormat, *, warnings: bool = True
) -> Iterator[str]:
    """One line per problem (and warning), for the text and github formats."""
    for result in results:
        findings = result.findings(warnings=warnings)
        if fmt != "github":
            for finding in findings:
                yield text_line(result.source, finding)
            continue
        places = _locations(result.source, findings)
        for finding in findings:
            yield github_line(result.source, finding, places.get(finding.parts))


def _locations(source: str | None, findings: Sequence[Finding]) -> dict[Any, tuple[int, int]]:
    """Line and column of each finding's JSON path (only --format github reads the file again for them)."""
    wanted = [f.parts for f in findings if f.line is None]
    if source is None or not wanted:
        return {}
    from core.graph.locate import locate

    try:
        with open(source, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return {}
    return locate(text, wanted)


def validation_document(
    results: Sequence[ValidationResult], *, strict: bool = False
) -> dict[str, Any]:
    """The ``--format json`` document (schema: graph-report.schema.json, kind graph-validation)."""
    return {
        "kind": "graph-validation",
        "version": VALIDATION_VERSION,
        "valid": all(passed(result, strict=strict) for result in results),
        "strict": strict,
        "files": [result.to_dict() for result in results],
    }


def passed(result: ValidationResult, *, strict: bool = False) -> bool:
    """Valid, and (with ``strict``) without warnings."""
    return result.ok and not (strict and result.warnings)


def summary(results: Sequence[ValidationResult], *, strict: bool = False) -> str:
    """`2 of 3 snapshots invalid: 5 problems, 1 warning` / `3 snapshots valid, 2 warnings`."""
    failed = sum(not passed(result, strict=strict) for result in results)
    problems = sum(len(result.problems) for result in results)
    warnings = sum(len(result.warnings) for result in results)
    count = len(results)
    noun = "snapshot" if count == 1 else "snapshots"
    tail = f"{_plural(problems, 'problem')}, {_plural(warnings, 'warning')}"
    if failed:
        return f"{failed} of {count} {noun} failed validation: {tail}"
    return f"{count} {noun} valid, {_plural(warnings, 'warning')}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
