"""Validation of graph snapshots: every problem at once, each with its JSON path.

Problems (the snapshot is refused): malformed JSON (one problem, with line and
column), schema violations, duplicate node or relationship ids, non-finite
numbers (``NaN``, ``Infinity``, or a literal too large for a double), and
relationship endpoints that name no node.

Warnings (reported, never fatal): a repeated label on a node (written once),
a self-loop, two relationships with the same ``from``, ``to`` and ``type``,
and a node without relationships.

One pass over the items, dicts keyed by id: linear in the snapshot's size.
"""

from __future__ import annotations

import difflib
import math
import os
import weakref
from collections import Counter
from collections.abc import Callable, Container, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from core.errors import InputError
from core.graph.checkers import ItemChecker, snapshot_checkers
from core.graph.findings import Finding, ValidationResult, sort_findings
from core.graph.model import GraphNode, GraphRelationship, GraphSnapshot, gc_paused
from core.graph.parsing import duplicate_keys, number_literal, parse_json, walk_non_finite

_SUGGEST_LIMIT = 10_000  # difflib over more ids than this is too slow to be worth it

# Snapshots this module built and found valid (endpoints resolved against the
# ids known then): checking them again for a merge or an import only needs the
# endpoint rule, against the graph they go into.
_validated: weakref.WeakValueDictionary[int, GraphSnapshot] = weakref.WeakValueDictionary()


def validate_snapshot_file(
    path: str | os.PathLike[str], *, known_node_ids: Container[str] = ()
) -> ValidationResult:
    """Validate one snapshot file; never raises for what is inside the file.

    ``known_node_ids`` are ids that relationships may point at besides the
    snapshot's own nodes (the base graph, when the file is a delta).
    """
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", path=source, fix="check the path") from None
    except OSError as exc:
        raise InputError(
            f"cannot read the file: {exc.strerror}",
            path=source,
            fix="check that it is a readable file",
        ) from None
    if not data.strip():
        empty = Finding(
            "malformed-json",
            "malformed JSON: the file is empty",
            (),
            'write a snapshot such as {"nodes": [], "relationships": []}',
            line=1,
            column=1,
        )
        return ValidationResult(source, (empty,))
    document, malformed, non_finite = parse_json(data)
    if malformed is not None:
        return ValidationResult(source, (malformed,))
    repeated = duplicate_keys(data, document)
    with gc_paused():
        # The parsed document is ours: each raw item is dropped once its typed
        # value is built, which keeps the peak near one copy of the snapshot.
        return _validate_document(document, source, known_node_ids, non_finite, consume=True,
                                  extra_problems=repeated)


def validate_document(
    document: Any,
    *,
    source: str | None = None,
    known_node_ids: Container[str] = (),
    scan_non_finite: bool = True,
) -> ValidationResult:
    """Validate a parsed wire document; the result holds the snapshot when it is valid."""
    with gc_paused():
        return _validate_document(document, source, known_node_ids, scan_non_finite)


def _validate_document(
    document: Any,
    source: str | None,
    known_node_ids: Container[str],
    scan_non_finite: bool,
    *,
    consume: bool = False,
    extra_problems: Sequence[Finding] = (),
) -> ValidationResult:
    shell, node_checker, rel_checker = snapshot_checkers()
    problems = [*extra_problems, *(Finding("schema", i.message, i.parts, i.fix) for i in shell.issues(document))]
    warnings: list[Finding] = []
    if not isinstance(document, dict):
        return ValidationResult(source, sort_findings(problems))
    raw_nodes = document.get("nodes")
    raw_rels = document.get("relationships")
    raw_nodes = raw_nodes if isinstance(raw_nodes, list) else []
    raw_rels = raw_rels if isinstance(raw_rels, list) else []

    def check_labels(index: int, item: dict[str, Any]) -> None:
        labels = item.get("labels")
        if labels and len(labels) > 1 and len(set(labels)) != len(labels):
            warnings.extend(_repeated_labels(index, labels))

    nodes = _parse_items(
        raw_nodes, "nodes", node_checker, GraphNode.from_dict, problems, consume=consume, inspect=check_labels
    )
    rels = _parse_items(
        raw_rels, "relationships", rel_checker, GraphRelationship.from_dict, problems, consume=consume
    )
    # Ids of nodes that failed the schema: relationships to them are not "missing" endpoints.
    unparsed_ids = {
        item["id"]
        for parsed, item in zip(nodes, raw_nodes, strict=True)
        if parsed is None and isinstance(item, dict) and isinstance(item.get("id"), str)
    } if problems else set()

    if scan_non_finite:
        problems.extend(_non_finite_properties(nodes, rels))
    known = _AnyOf(known_node_ids, unparsed_ids) if unparsed_ids else known_node_ids
    # Structural warnings (isolated nodes, ...) about items that failed the schema would mislead.
    value_problems, value_warnings = check_values(
        nodes, rels, known_node_ids=known, warn=not problems
    )
    problems.extend(value_problems)
    warnings.extend(value_warnings)
    snapshot = None
    if not problems:
        snapshot = GraphSnapshot(tuple(nodes), tuple(rels))  # type: ignore[arg-type]
        _validated[id(snapshot)] = snapshot
    return ValidationResult(source, sort_findings(problems), sort_findings(warnings), snapshot)


class _AnyOf:
    """Membership in any of several containers."""

    def __init__(self, *containers: Container[str]) -> None:
        self._containers = containers

    def __contains__(self, item: object) -> bool:
        return any(item in container for container in self._containers)


def mark_validated(snapshot: GraphSnapshot) -> GraphSnapshot:
    """Record that ``snapshot`` keeps every rule (it comes from a valid Graph)."""
    _validated[id(snapshot)] = snapshot
    return snapshot


Item = TypeVar("Item", GraphNode, GraphRelationship)


def _parse_items(
    raw: list[Any],
    section: str,
    checker: ItemChecker,
    build: Callable[[dict[str, Any]], Item],
    problems: list[Finding],
    *,
    consume: bool,
    inspect: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[Item | None]:
    """Each raw item built when it passes the schema, else None and its schema problems added.

    ``inspect`` sees each item that passes, with its index, before it is built.
    With ``consume``, each raw item that was built is replaced by None in ``raw``.
    """
    parsed: list[Item | None] = []
    fast = checker.fast
    for index, item in enumerate(raw):
        if (fast is not None and fast(item)) or checker.is_valid(item):
            if inspect is not None:
                inspect(index, item)
            parsed.append(build(item))
            if consume:
                raw[index] = None
            continue
        problems.extend(_schema_problems(checker, item, section, index))
        parsed.append(None)
    return parsed


def _schema_problems(checker: ItemChecker, item: Any, section: str, index: int) -> list[Finding]:
    return [
        Finding("schema", issue.message, (section, index, *issue.parts), issue.fix)
        for issue in checker.issues(item)
    ]


def _repeated_labels(index: int, labels: list[str]) -> Iterator[Finding]:
    seen: set[str] = set()
    for position, label in enumerate(labels):
        if label in seen:
            yield Finding(
                "duplicate-label",
                f"label {label!r} repeated",
                ("nodes", index, "labels", position),
                "list each label once; it is written once",
                "warning",
            )
        seen.add(label)


def _non_finite_properties(
    nodes: Sequence[GraphNode | None], rels: Sequence[GraphRelationship | None]
) -> Iterator[Finding]:
    for section, items in (("nodes", nodes), ("relationships", rels)):
        for index, item in enumerate(items):
            if item is None or not item.properties:
                continue
            for parts, value in walk_non_finite(item.properties, (section, index, "properties")):
                yield Finding(
                    "non-finite-number",
                    f"non-finite number {number_literal(value)}",
                    parts,
                    "JSON has no NaN or Infinity: use a finite number, null or a string",
                )


def check_values(
    nodes: Sequence[GraphNode | None],
    rels: Sequence[GraphRelationship | None],
    *,
    known_node_ids: Container[str] = (),
    warn: bool = True,
) -> tuple[list[Finding], list[Finding]]:
    """The rules a schema cannot express, over typed items (``None``: failed the schema).

    Returns (problems, warnings). Each rule is one comprehension over the
    items, with a slower pass only over the items that break it.
    """
    first_node = {
        node.id: index for index, node in reversed(list(enumerate(nodes))) if node is not None
    }
    problems = _duplicates("nodes", nodes, first_node)
    first_rel = {rel.id: index for index, rel in reversed(list(enumerate(rels))) if rel is not None}
    problems += _duplicates("relationships", rels, first_rel)
    isfinite = math.isfinite
    for index in [i for i, rel in enumerate(rels) if rel is not None and not isfinite(rel.weight)]:
        weight = rels[index].weight  # type: ignore[union-attr]
        problems.append(
            Finding(
                "non-finite-weight",
                f"non-finite weight {number_literal(weight)}",
                ("relationships", index, "weight"),
                "use a finite number; JSON has no NaN or Infinity",
            )
        )
    suspects = [
        i
        for i, rel in enumerate(rels)
        if rel is not None and (rel.source not in first_node or rel.target not in first_node)
    ]
    for index in suspects:
        rel = rels[index]
        assert rel is not None
        for end, node_id in (("from", rel.source), ("to", rel.target)):
            if node_id not in first_node and node_id not in known_node_ids:
                problems.append(_missing_endpoint(index, end, node_id, first_node, len(problems)))
    warnings = _warnings(nodes, rels, first_node) if warn else []
    return problems, warnings


def _duplicates(
    section: str, items: Sequence[GraphNode | GraphRelationship | None], first: dict[str, int]
) -> list[Finding]:
    if len(first) == sum(item is not None for item in items):
        return []
    kind = "node" if section == "nodes" else "relationship"
    fix = (
        "give each node its own id, or merge the two into one"
        if kind == "node"
        else ("give each relationship its own id")
    )
    return [
        Finding(
            f"duplicate-{kind}-id",
            f"duplicate {kind} id {item.id!r}, first at $.{section}[{first[item.id]}]",
            (section, index, "id"),
            fix,
        )
        for index, item in enumerate(items)
        if item is not None and first[item.id] != index
    ]


def _warnings(
    nodes: Sequence[GraphNode | None],
    rels: Sequence[GraphRelationship | None],
    first_node: dict[str, int],
) -> list[Finding]:
    warnings = [
        Finding(
            "self-loop",
            f"self-loop on node {rel.source!r}",
            ("relationships", index),
            "allowed; check that from and to are meant to be the same node",
            "warning",
        )
        for index, rel in enumerate(rels)
        if rel is not None and rel.source == rel.target
    ]
    keys = [None if rel is None else (rel.source, rel.target, rel.type) for rel in rels]
    repeated = {key for key, count in Counter(keys).items() if count > 1 and key is not None}
    if repeated:
        first_key: dict[tuple[str, str, str], int] = {}
        for index, key in enumerate(keys):
            if key in repeated:
                twin = first_key.setdefault(key, index)  # type: ignore[arg-type]
                if twin != index:
                    warnings.append(
                        Finding(
                            "parallel-relationship",
                            f"same from, to and type as $.relationships[{twin}]",
                            ("relationships", index),
                            "allowed; merge them into one relationship if they say the same thing",
                            "warning",
                        )
                    )
    connected = {rel.source for rel in rels if rel is not None}
    connected.update({rel.target for rel in rels if rel is not None})
    warnings.extend(
        Finding(
            "isolated-node",
            f"node {node_id!r} has no relationships",
            ("nodes", index),
            "allowed; it is kept, and ranked lightest",
            "warning",
        )
        for node_id, index in first_node.items()
        if node_id not in connected
    )
    return warnings


def _missing_endpoint(
    index: int, end: str, node_id: str, node_ids: dict[str, int], reported: int
) -> Finding:
    fix = "add a node with this id, or correct the id"
    if reported < 20 and len(node_ids) <= _SUGGEST_LIMIT:
        close = difflib.get_close_matches(node_id, list(node_ids), n=1)
        if close:
            fix = f"did you mean {close[0]!r}? otherwise add a node with this id"
    return Finding(
        "missing-endpoint",
        f"{end} {node_id!r} is not a node id",
        ("relationships", index, end),
        fix,
    )


def check_snapshot_values(
    snapshot: GraphSnapshot, *, known_node_ids: Container[str] = (), source: str | None = None
) -> ValidationResult:
    """Validate a snapshot built in Python (not read from a file), types included.

    A snapshot that validation built is already known to keep every rule but
    the endpoint rule against ``known_node_ids``; only that one is checked.
    """
    if _validated.get(id(snapshot)) is snapshot:
        endpoint_problems = _endpoint_problems(snapshot, known_node_ids)
        return ValidationResult(
            source, endpoint_problems, (), None if endpoint_problems else snapshot
        )
    problems: list[Finding] = []
    for section, items in (("nodes", snapshot.nodes), ("relationships", snapshot.relationships)):
        for index, item in enumerate(items):
            problems.extend(_type_problems(section, index, item))
    if problems:
        return ValidationResult(source, sort_findings(problems))
    problems.extend(_non_finite_properties(snapshot.nodes, snapshot.relationships))
    found, warnings = check_values(
        snapshot.nodes, snapshot.relationships, known_node_ids=known_node_ids
    )
    problems.extend(found)
    return ValidationResult(
        source, sort_findings(problems), sort_findings(warnings), None if problems else snapshot
    )


def _endpoint_problems(
    snapshot: GraphSnapshot, known_node_ids: Container[str]
) -> tuple[Finding, ...]:
    own = {node.id for node in snapshot.nodes}
    problems = []
    for index, rel in enumerate(snapshot.relationships):
        for end, node_id in (("from", rel.source), ("to", rel.target)):
            if node_id not in own and node_id not in known_node_ids:
                problems.append(
                    Finding(
                        "missing-endpoint",
                        f"{end} {node_id!r} is not a node id",
                        ("relationships", index, end),
                        "add a node with this id, or correct the id",
                    )
                )
    return tuple(problems)


def _type_problems(section: str, index: int, item: Any) -> Iterator[Finding]:
    expected = GraphNode if section == "nodes" else GraphRelationship
    if not isinstance(item, expected):
        yield Finding(
            "schema",
            f"expected a {expected.__name__}, found {type(item).__name__}",
            (section, index),
            f"build it with {expected.__name__}(...)",
        )
        return
    names = ("id",) if section == "nodes" else ("id", "source", "target", "type")
    for name in names:
        value = getattr(item, name)
        if not isinstance(value, str) or not value:
            wire = {"source": "from", "target": "to"}.get(name, name)
            yield Finding(
                "schema",
                f"{wire} must be a non-empty string, found {value!r}",
                (section, index, wire),
                "use a non-empty string",
            )
    if isinstance(item, GraphRelationship) and (
        isinstance(item.weight, bool) or not isinstance(item.weight, int | float)
    ):
        yield Finding(
            "schema",
            f"weight must be a number, found {item.weight!r}",
            (section, index, "weight"),
            "use a finite number",
        )
    if isinstance(item, GraphNode) and not all(
        isinstance(label, str) and label for label in item.labels
    ):
        yield Finding(
            "schema",
            "labels must be non-empty strings",
            (section, index, "labels"),
            "use non-empty strings",
        )
    if not isinstance(item.properties, dict):
        yield Finding(
            "schema",
            "properties must be a dict",
            (section, index, "properties"),
            "use a dict of JSON values",
        )
