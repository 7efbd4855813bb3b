"""`compact graph ...`: check, merge, import and render working-graph snapshots.

Thin by design: each command parses its options, makes one call into
``core.graph`` and writes the result. The options are declared with the
library's own enums and defaults (``core.graph.options``, standard library
only); the graph code itself is imported lazily, to keep `compact --help`
fast. Domain errors propagate to the boundary in ``cli.errors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.options import takes
from cli.output import check_output_target, print_json, write_json
from core.errors import CheckFailed, InputError
from core.graph.options import (
    DEFAULT_MARKER,
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_RELATIONSHIPS,
    ConflictPolicy,
    Eviction,
    GraphDirection,
    WeightRule,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.graph import GraphCaps

graph_app = typer.Typer(
    help="Check, merge, import and render working-graph snapshots (JSON; see docs/graph.md).",
    short_help="Check, merge, import and render working-graph snapshots.",
    no_args_is_help=True,
)


class Format(StrEnum):
    text = "text"
    json = "json"
    github = "github"


def _file(metavar: str, help_text: str) -> Any:
    return typer.Argument(
        ...,
        exists=True,
        dir_okay=False,
        readable=True,
        metavar=metavar,
        help=help_text,
        show_default=False,
    )


def _cap(flag: str, what: str, default: int) -> Any:
    return typer.Option(flag, min=0, help=f"{what} cap of the resulting graph.", show_default=str(default))


MaxNodes = Annotated[int | None, _cap("--max-nodes", "Node", DEFAULT_MAX_NODES)]
MaxRelationships = Annotated[int | None, _cap("--max-relationships", "Relationship", DEFAULT_MAX_RELATIONSHIPS)]
EvictOption = Annotated[
    Eviction,
    typer.Option(
        "--evict", help="At a cap: refuse the whole operation (none) or evict the lightest nodes."
    ),
]
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        dir_okay=False,
        help="Write the snapshot here (atomically) instead of stdout ('-': stdout).",
        show_default=False,
    ),
]
ReportOption = Annotated[
    str | None,
    typer.Option(
        "--report",
        metavar="FILE",
        help="Write the JSON report here ('-' for stdout when -o is given); "
        "without it a one-line summary goes to stderr.",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class SnapshotFlags:
    """The caps a snapshot a command makes is held to, and where it and its report go: the flags
    `graph merge` and `graph import` share."""

    max_nodes: MaxNodes = None
    max_relationships: MaxRelationships = None
    evict: EvictOption = Eviction.NONE
    output: OutputOption = None
    report: ReportOption = None

    def caps(self) -> GraphCaps:
        from core.graph import GraphCaps

        return GraphCaps(
            DEFAULT_MAX_NODES if self.max_nodes is None else self.max_nodes,
            DEFAULT_MAX_RELATIONSHIPS if self.max_relationships is None else self.max_relationships,
            self.evict,
        )


def _produce(output: Path | None, report: str | None, work: Callable[[], tuple[Any, Any]]) -> None:
    """Check where the results go, then run ``work`` and write the graph and report it returns there."""
    from core.io.staged import names_stdout

    if output is not None and names_stdout(output):
        output = None  # `-o -` (or /dev/stdout) is stdout, as for `compact run`
    if report is not None and names_stdout(report):
        report = "-"
    if report == "-" and output is None:
        raise InputError(
            "--report - needs -o: the snapshot already goes to stdout",
            fix="pass -o FILE for the snapshot, or --report FILE",
        )
    for option, path in (("--output", output), ("--report", report)):
        if path not in (None, "-"):  # (a folder found only when writing failed after stdout had the snapshot)
            check_output_target(option, path)
    graph, result = work()
    _write_outputs(graph, result, output, report)


def _write_outputs(graph: Any, report: Any, output: Path | None, report_dest: str | None) -> None:
    from core.graph import dump_snapshot_chunks, save_snapshot

    if output is None:
        stdout = typer.get_binary_stream("stdout")
        for chunk in dump_snapshot_chunks(graph):
            stdout.write(chunk)
        stdout.flush()
    else:
        save_snapshot(graph, output)
    if report_dest is None:
        typer.echo(f"compact: {report.summary()}", err=True)
        return
    write_json(report.to_dict(), report_dest)


@graph_app.command("validate", short_help="Check snapshots; exit 1 when any is invalid.")
def validate(
    files: Annotated[list[Path], _file("FILE", "Snapshot files to check.")],
    output_format: Annotated[
        Format,
        typer.Option(
            "--format",
            "-f",
            help="text: one line per finding; json: one document; github: workflow annotations.",
        ),
    ] = Format.text,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail the check too.")] = False,
    warnings: Annotated[
        bool,
        typer.Option("--warnings/--no-warnings", help="List warnings (text and github formats)."),
    ] = True,
) -> None:
    """Check snapshots: exit 0 when all are valid, 1 when any is not (made for CI).

    Problems: malformed JSON; schema violations (schemas/graph-snapshot.schema.json); duplicate node
    or relationship ids; non-finite numbers (NaN, Infinity, 1e999); relationship endpoints missing
    from the nodes. Warnings, which fail only with --strict: a repeated label, a self-loop, two
    relationships with the same from, to and type, a node without relationships.
    """
    from core.graph import validate_snapshot_file
    from core.graph.output import finding_lines, passed, summary, validation_document

    results = [validate_snapshot_file(path) for path in files]
    if output_format is Format.json:
        print_json(validation_document(results, strict=strict))
    else:
        for line in finding_lines(results, output_format.value, warnings=warnings):  # type: ignore[arg-type]
            typer.echo(line)
    text = summary(results, strict=strict)
    if not all(passed(result, strict=strict) for result in results):
        raise CheckFailed(text, fix="`compact graph validate --help` lists the rules")
    typer.echo(f"compact: {text}", err=True)


@graph_app.command("merge", short_help="Merge one snapshot into another, all or nothing.")
@takes
def merge(
    base: Annotated[Path, _file("BASE", "The snapshot merged into.")],
    incoming: Annotated[
        Path, _file("INCOMING", "The snapshot (or delta) merged in; it may point at nodes of BASE.")
    ],
    result: SnapshotFlags,
    policy: Annotated[
        ConflictPolicy, typer.Option("--policy", help="Who wins on an id conflict.")
    ] = ConflictPolicy.MERGE,
    weights: Annotated[
        WeightRule,
        typer.Option("--weights", help="How the weights of a relationship on both sides combine."),
    ] = WeightRule.INCOMING,
) -> None:
    """Merge INCOMING into BASE, all or nothing; the merged snapshot goes to -o or stdout."""
    from core.graph import MergePolicy, merge_snapshot_files

    def work() -> tuple[Any, Any]:
        merge_policy = MergePolicy(policy, weights)
        return merge_snapshot_files(base, incoming, merge_policy, caps=result.caps())

    _produce(result.output, result.report, work)


@graph_app.command("import", short_help="Validate and normalise a snapshot; report what it holds.")
@takes
def import_(
    snapshot: Annotated[Path, _file("SNAPSHOT", "The snapshot to import.")],
    result: SnapshotFlags,
) -> None:
    """Validate and normalise a snapshot (all fields written, labels once); report what it holds."""
    from core.graph import import_snapshot_file

    caps = result.caps()
    _produce(result.output, result.report, lambda: import_snapshot_file(snapshot, caps=caps))


@graph_app.command("render", short_help="Print the graph message a transcript would get.")
def render(
    snapshot: Annotated[Path, _file("SNAPSHOT", "The snapshot to render.")],
    max_nodes: Annotated[int, typer.Option("--max-nodes", min=0, help="Most nodes shown.")] = 64,
    max_relationships: Annotated[
        int, typer.Option("--max-relationships", min=0, help="Most relationships shown.")
    ] = 128,
    focus: Annotated[
        list[str] | None,
        typer.Option(
            "--focus", metavar="ID", help="Centre on this node (repeatable).", show_default=False
        ),
    ] = None,
    direction: Annotated[
        GraphDirection, typer.Option("--direction", help="Relationships a focus walk follows.")
    ] = GraphDirection.BOTH,
    depth: Annotated[int, typer.Option("--depth", min=0, help="Hops from the focus nodes.")] = 1,
    max_property_chars: Annotated[
        int, typer.Option("--max-property-chars", min=0, help="Longest properties text per item.")
    ] = 200,
    marker: Annotated[
        str, typer.Option("--marker", metavar="WORDS", help="First words of the message.")
    ] = DEFAULT_MARKER,
) -> None:
    """Print the graph message a transcript would get (nothing when the graph is empty)."""
    from core.graph import GraphCaps, GraphContextConfig, load_snapshot, render_graph_text

    config = GraphContextConfig(
        max_nodes, max_relationships, tuple(focus or ()), direction, depth, max_property_chars
    )
    text = render_graph_text(load_snapshot(snapshot, caps=GraphCaps.unlimited()), config, marker)
    if text is None:
        typer.echo(f"compact: {snapshot}: the graph is empty; there is no graph message", err=True)
        return
    typer.echo(text)
