"""Validation of snapshots: every kind of problem, with its path, all at once; warnings never fail."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from core.errors import GraphError
from core.graph import (
    Graph,
    GraphNode,
    GraphRelationship,
    GraphSnapshot,
    load_snapshot,
    parse_json,
    validate_document,
    validate_snapshot_file,
)

FIXTURES = Path(__file__).parent / "fixtures" / "graph"
SAMPLES = Path(__file__).parent.parent / "sample_transcripts" / "graph"

# fixture -> (code, JSON path, message, line, column) of its one problem
ONE_PROBLEM = {
    "malformed-trailing-comma.json": (
        "malformed-json",
        "$",
        "malformed JSON: Expecting value",
        4,
        3,
    ),
    "malformed-empty.json": ("malformed-json", "$", "malformed JSON: the file is empty", 1, 1),
    "malformed-bom.json": (
        "malformed-json",
        "$",
        "malformed JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)",
        1,
        1,
    ),
    "nan-weight.json": (
        "non-finite-weight",
        "$.relationships[0].weight",
        "non-finite weight NaN",
        None,
        None,
    ),
    "infinity-weight.json": (
        "non-finite-weight",
        "$.relationships[1].weight",
        "non-finite weight -Infinity",
        None,
        None,
    ),
    "overflow-weight.json": (
        "non-finite-weight",
        "$.relationships[0].weight",
        "non-finite weight 1e999",
        None,
        None,
    ),
    "nan-property.json": (
        "non-finite-number",
        "$.nodes[0].properties.scores[1]",
        "non-finite number NaN",
        None,
        None,
    ),
    "duplicate-node-id.json": (
        "duplicate-node-id",
        "$.nodes[2].id",
        "duplicate node id 'a', first at $.nodes[0]",
        None,
        None,
    ),
    "duplicate-relationship-id.json": (
        "duplicate-relationship-id",
        "$.relationships[1].id",
        "duplicate relationship id 'r1', first at $.relationships[0]",
        None,
        None,
    ),
    "missing-endpoint.json": (
        "missing-endpoint",
        "$.relationships[0].to",
        "to 'vualt' is not a node id",
        None,
        None,
    ),
    "missing-field.json": (
        "schema",
        "$.relationships[0]",
        "missing required field 'type'",
        None,
        None,
    ),
    "unknown-field.json": ("schema", "$.nodes[0].lables", "unknown field 'lables'", None, None),
    "wrong-type.json": ("schema", "$.nodes[0].id", "expected a string, found a number", None, None),
    "not-an-object.json": ("schema", "$", "expected an object, found an array", None, None),
    "missing-relationships.json": (
        "schema",
        "$",
        "missing required field 'relationships'",
        None,
        None,
    ),
}


def _sample_graph() -> Graph:
    return load_snapshot(SAMPLES / "valid.json")


@pytest.mark.parametrize("name", sorted(ONE_PROBLEM))
def test_each_invalid_snapshot_reports_its_problem_with_its_path(name: str) -> None:
    result = validate_snapshot_file(FIXTURES / name)
    code, path, message, line, column = ONE_PROBLEM[name]
    assert not result.ok
    assert result.snapshot is None
    assert [(p.code, p.path, p.message, p.line, p.column) for p in result.problems] == [
        (code, path, message, line, column)
    ]
    assert all(p.severity == "error" and p.fix for p in result.problems)


@pytest.mark.parametrize("name", sorted(ONE_PROBLEM))
def test_each_invalid_snapshot_leaves_the_graph_untouched(name: str) -> None:
    graph = _sample_graph()
    before = graph.snapshot()
    document, malformed, _ = parse_json((FIXTURES / name).read_bytes())
    if malformed is None and document is not None:
        with pytest.raises(GraphError):
            graph.merge(document)
        with pytest.raises(GraphError):
            graph.replace(document)
    with pytest.raises(GraphError) as raised:
        load_snapshot(FIXTURES / name)
    assert str(raised.value).startswith(str(FIXTURES / name))
    assert graph.snapshot() == before


def test_fix_names_a_close_id() -> None:
    (problem,) = validate_snapshot_file(FIXTURES / "missing-endpoint.json").problems
    assert problem.fix == "did you mean 'vault'? otherwise add a node with this id"
    (problem,) = validate_snapshot_file(FIXTURES / "unknown-field.json").problems
    assert problem.fix == 'did you mean "labels"?'


def test_several_problems_in_one_file_are_all_reported_in_document_order() -> None:
    result = validate_snapshot_file(SAMPLES / "invalid.json")
    assert [(p.path, p.code) for p in result.problems] == [
        ("$.nodes[1].lables", "schema"),
        ("$.nodes[2].id", "duplicate-node-id"),
        ("$.relationships[0].weight", "non-finite-weight"),
        ("$.relationships[1].to", "missing-endpoint"),
        ("$.relationships[2].id", "duplicate-relationship-id"),
        ("$.relationships[2].weight", "non-finite-weight"),
        ("$.relationships[3].type", "schema"),
        ("$.relationships[3].weight", "schema"),
    ]
    # The node that failed the schema still counts as a node: no cascade of "missing endpoint".
    assert not [p for p in result.problems if "'vault'" in p.message]


def test_problems_carry_json_pointers() -> None:
    result = validate_snapshot_file(SAMPLES / "invalid.json")
    assert result.problems[0].pointer == "/nodes/1/lables"
    assert result.problems[0].to_dict() == {
        "severity": "error",
        "code": "schema",
        "path": "$.nodes[1].lables",
        "pointer": "/nodes/1/lables",
        "message": "unknown field 'lables'",
        "fix": 'did you mean "labels"?',
        "line": None,
        "column": None,
    }


def test_warnings_do_not_fail() -> None:
    result = validate_snapshot_file(FIXTURES / "warnings.json")
    assert result.ok and result.snapshot is not None
    assert [(w.code, w.path, w.severity) for w in result.warnings] == [
        ("duplicate-label", "$.nodes[0].labels[1]", "warning"),
        ("isolated-node", "$.nodes[2]", "warning"),
        ("parallel-relationship", "$.relationships[1]", "warning"),
        ("self-loop", "$.relationships[2]", "warning"),
    ]
    assert result.snapshot.nodes[0].labels == ("X",)  # a repeated label is kept once


def test_samples_are_valid_and_the_delta_is_a_full_snapshot() -> None:
    for name in ("valid.json", "delta.json"):
        result = validate_snapshot_file(SAMPLES / name)
        assert result.ok, result.problems
        assert not result.warnings


def test_defaults_fill_optional_fields() -> None:
    snapshot = GraphSnapshot.from_dict(
        {
            "nodes": [{"id": "a"}, {"id": "b"}],
            "relationships": [{"id": "r", "from": "a", "to": "b", "type": "T"}],
        }
    )
    assert snapshot.nodes[0] == GraphNode("a", (), {})
    assert snapshot.relationships[0] == GraphRelationship("r", "a", "b", "T", 1, {})


def test_a_delta_may_point_at_known_nodes() -> None:
    delta = {
        "nodes": [],
        "relationships": [{"id": "r9", "from": "alice", "to": "vault", "type": "T"}],
    }
    assert not validate_document(delta).ok
    assert validate_document(delta, known_node_ids={"alice", "vault"}).ok


def test_in_memory_values_are_checked_too() -> None:
    graph = Graph()
    with pytest.raises(GraphError, match=r"\$\.relationships\[0\]\.weight: non-finite weight NaN"):
        graph.merge(
            GraphSnapshot((GraphNode("a"),), (GraphRelationship("r", "a", "a", "T", float("nan")),))
        )
    with pytest.raises(
        GraphError, match=r"\$\.nodes\[0\]\.properties\.x: non-finite number Infinity"
    ):
        graph.merge(GraphSnapshot((GraphNode("a", (), {"x": float("inf")}),)))
    with pytest.raises(GraphError, match=r"\$\.nodes\[0\]\.id: id must be a non-empty string"):
        graph.merge(GraphSnapshot((GraphNode(""),)))
    with pytest.raises(GraphError, match=r"from 'ghost' is not a node id"):
        graph.add_relationship(GraphRelationship("r", "ghost", "ghost", "T"))
    assert graph.is_empty


def test_load_snapshot_names_the_first_problem_and_counts_the_rest() -> None:
    with pytest.raises(GraphError) as raised:
        load_snapshot(SAMPLES / "invalid.json")
    assert str(raised.value) == (
        f"{SAMPLES / 'invalid.json'}: $.nodes[1].lables: unknown field 'lables' (and 7 more problems) "
        '(did you mean "labels"?; `compact graph validate FILE` lists them all)'
    )
    assert raised.value.exit_code == 2


def test_malformed_json_error_has_line_and_column() -> None:
    with pytest.raises(GraphError) as raised:
        load_snapshot(FIXTURES / "malformed-trailing-comma.json")
    assert raised.value.line == 4 and raised.value.column == 3
    assert str(raised.value).startswith(
        f"{FIXTURES / 'malformed-trailing-comma.json'}:4:3: malformed JSON"
    )


def test_validation_result_to_dict_is_json_ready() -> None:
    result = validate_snapshot_file(FIXTURES / "warnings.json")
    data = orjson.loads(orjson.dumps(result.to_dict()))
    assert list(data) == ["file", "valid", "problems", "warnings", "counts"]
    assert data["counts"] == {"nodes": 3, "relationships": 3}
