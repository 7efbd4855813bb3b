"""Merge policies and weight rules, import, caps with both at-cap policies, and the reports' schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from core.errors import GraphError
from core.graph import (
    Eviction,
    Graph,
    GraphCaps,
    GraphNode,
    GraphRelationship,
    GraphSnapshot,
    MergePolicy,
    load_snapshot,
    merge_snapshot_files,
)
from core.graph.checkers import REPORT_SCHEMA
from core.io.schema_loader import load_schema

SAMPLES = Path(__file__).parent.parent / "sample_transcripts" / "graph"


def report_validator() -> Draft202012Validator:
    return Draft202012Validator(load_schema(REPORT_SCHEMA))


def assert_valid_report(report: Any) -> dict[str, Any]:
    data = orjson.loads(orjson.dumps(report.to_dict()))
    errors = [error.message for error in report_validator().iter_errors(data)]
    assert errors == []
    return data


def base_graph(**caps: Any) -> Graph:
    return Graph.from_dict(
        {
            "nodes": [
                {"id": "a", "labels": ["Person"], "properties": {"name": "A", "age": 1}},
                {"id": "b", "labels": ["Place"], "properties": {}},
            ],
            "relationships": [
                {
                    "id": "r1",
                    "from": "a",
                    "to": "b",
                    "type": "VISITS",
                    "weight": 2,
                    "properties": {"n": 1},
                },
            ],
        },
        caps=GraphCaps(**caps) if caps else None,
    )


INCOMING = {
    "nodes": [
        {"id": "a", "labels": ["Owner"], "properties": {"age": 2, "email": "a@x"}},
        {"id": "c", "labels": [], "properties": {}},
    ],
    "relationships": [
        {"id": "r1", "from": "a", "to": "b", "type": "VISITS", "weight": 5, "properties": {"m": 2}},
        {"id": "r2", "from": "c", "to": "b", "type": "NEAR", "weight": 1, "properties": {}},
    ],
}


@pytest.mark.parametrize(
    ("policy", "labels", "properties", "rel_properties", "resolution"),
    [
        ("keep_existing", ("Person",), {"name": "A", "age": 1}, {"n": 1}, "kept_existing"),
        ("prefer_incoming", ("Owner",), {"age": 2, "email": "a@x"}, {"m": 2}, "took_incoming"),
        (
            "merge",
            ("Person", "Owner"),
            {"name": "A", "age": 2, "email": "a@x"},
            {"n": 1, "m": 2},
            "merged",
        ),
    ],
)
def test_each_conflict_policy(
    policy: str,
    labels: tuple[str, ...],
    properties: dict[str, Any],
    rel_properties: dict[str, Any],
    resolution: str,
) -> None:
    graph = base_graph()
    report = graph.merge(INCOMING, MergePolicy(policy))
    node = graph.nodes["a"]
    assert node.labels == labels
    assert node.properties == properties
    assert graph.relationships["r1"].properties == rel_properties
    assert [(c.kind, c.id, c.resolution) for c in report.conflicts] == [
        ("node", "a", resolution),
        ("relationship", "r1", resolution),
    ]
    assert report.nodes.added == ("c",) and report.relationships.added == ("r2",)
    if policy == "keep_existing":
        assert report.nodes.updated == () and report.nodes.unchanged == 1
        assert {c.outcome for c in report.conflicts} == {"unchanged"}
    else:
        assert report.nodes.updated == ("a",) and report.relationships.updated == ("r1",)
    assert report.conflicts[0].fields == ("labels", "properties")
    assert report.conflicts[1].fields == ("weight", "properties")
    assert_valid_report(report)


@pytest.mark.parametrize(
    ("policy", "weights", "expected"),
    [
        ("merge", "incoming", 5),
        ("merge", "max", 5),
        ("merge", "sum", 7),
        ("prefer_incoming", "incoming", 5),
        ("prefer_incoming", "max", 5),
        ("prefer_incoming", "sum", 7),
        ("keep_existing", "incoming", 2),
    ],
)
def test_each_weight_rule(policy: str, weights: str, expected: float) -> None:
    graph = base_graph()
    report = graph.merge(INCOMING, MergePolicy(policy, weights))
    assert graph.relationships["r1"].weight == expected
    conflict = report.to_dict()["conflicts"][1]
    assert conflict["weight"] == {"existing": 2, "incoming": 5, "result": expected}


def test_max_keeps_the_heavier_existing_weight() -> None:
    graph = base_graph()
    lighter = {"nodes": [], "relationships": [{**INCOMING["relationships"][0], "weight": 0.5}]}
    graph.merge(lighter, MergePolicy("merge", "max"))
    assert graph.relationships["r1"].weight == 2


def test_keep_existing_refuses_a_weight_rule_it_would_ignore() -> None:
    with pytest.raises(GraphError, match="has no effect with policy keep_existing"):
        MergePolicy("keep_existing", "sum")


def test_sum_counts_a_repeated_identical_relationship_as_a_conflict() -> None:
    graph = base_graph()
    same = {"nodes": [], "relationships": [graph.relationships["r1"].to_dict()]}
    report = graph.merge(same, MergePolicy("merge", "sum"))
    assert graph.relationships["r1"].weight == 4
    assert [(c.id, c.fields, c.outcome) for c in report.conflicts] == [("r1", (), "updated")]
    report = graph.merge({"nodes": [], "relationships": [graph.relationships["r1"].to_dict()]})
    assert report.conflicts == () and report.relationships.unchanged == 1 and not report.changed


def test_identical_items_are_unchanged_not_conflicts() -> None:
    graph = base_graph()
    report = graph.merge(graph.snapshot())
    assert report.conflicts == ()
    assert (report.nodes.unchanged, report.relationships.unchanged) == (2, 1)
    assert not report.changed


def test_json_equality_tells_1_from_true() -> None:
    graph = Graph.from_dict({"nodes": [{"id": "a", "properties": {"x": 1}}], "relationships": []})
    report = graph.merge(
        {"nodes": [{"id": "a", "properties": {"x": True}}], "relationships": []},
        MergePolicy("prefer_incoming"),
    )
    assert report.nodes.updated == ("a",)
    assert graph.nodes["a"].properties == {"x": True}


def test_merge_may_point_at_existing_nodes_and_keeps_order() -> None:
    graph = base_graph()
    graph.merge(
        {
            "nodes": [{"id": "z"}],
            "relationships": [{"id": "r7", "from": "z", "to": "a", "type": "T"}],
        }
    )
    assert list(graph.nodes) == ["a", "b", "z"]
    assert list(graph.relationships) == ["r1", "r7"]


def test_merge_is_all_or_nothing_on_invalid_input() -> None:
    graph = base_graph()
    before = graph.snapshot()
    bad = {
        "nodes": [{"id": "new"}],
        "relationships": [{"id": "r9", "from": "new", "to": "ghost", "type": "T"}],
    }
    with pytest.raises(
        GraphError, match=r"merge refused: \$\.relationships\[0\]\.to: to 'ghost' is not a node id"
    ):
        graph.merge(bad)
    assert graph.snapshot() == before


def test_a_sum_that_overflows_is_refused_whole() -> None:
    graph = Graph.from_dict(
        {
            "nodes": [{"id": "a"}],
            "relationships": [{"id": "r", "from": "a", "to": "a", "type": "T", "weight": 1e308}],
        }
    )
    before = graph.snapshot()
    with pytest.raises(GraphError, match="sum to infinity"):
        graph.merge(graph.snapshot(), MergePolicy("merge", "sum"))
    assert graph.snapshot() == before


# -- caps -------------------------------------------------------------------------------------


def chain_graph(caps: GraphCaps) -> Graph:
    """n0 -(1)-> n1 -(2)-> n2 -(3)-> n3, and n4 alone: weights n0 1, n1 3, n2 5, n3 3, n4 0."""
    nodes = [GraphNode(f"n{i}") for i in range(5)]
    rels = [GraphRelationship(f"r{i}", f"n{i}", f"n{i + 1}", "NEXT", i + 1) for i in range(3)]
    graph = Graph(GraphSnapshot(tuple(nodes), tuple(rels)))
    graph.caps = caps  # from the next change on
    return graph


def test_at_the_node_cap_a_merge_is_refused_whole() -> None:
    graph = chain_graph(GraphCaps(max_nodes=5))
    before = graph.snapshot()
    with pytest.raises(GraphError) as raised:
        graph.merge({"nodes": [{"id": "x"}, {"id": "n0", "labels": ["L"]}], "relationships": []})
    assert str(raised.value) == (
        "merge refused: the graph would hold 6 nodes (cap 5); nothing was changed "
        "(raise --max-nodes, or pass --evict lightest to drop the lightest nodes)"
    )
    assert graph.snapshot() == before


def test_at_the_relationship_cap_a_merge_is_refused_whole() -> None:
    graph = chain_graph(GraphCaps(max_relationships=3))
    before = graph.snapshot()
    with pytest.raises(GraphError, match=r"4 relationships \(cap 3\)"):
        graph.add_relationship(GraphRelationship("r9", "n4", "n0", "T"))
    assert graph.snapshot() == before


def test_lightest_eviction_at_the_node_cap() -> None:
    graph = chain_graph(GraphCaps(max_nodes=4, eviction=Eviction.LIGHTEST))
    report = graph.merge(
        {
            "nodes": [{"id": "x"}],
            "relationships": [{"id": "rx", "from": "x", "to": "n2", "type": "T", "weight": 0.5}],
        }
    )
    # weights: n4 0, x 0.5, n0 1, ... -> n4 and x go (x was just added: it is the lightest)
    assert [(n.id, n.weight, n.relationships) for n in report.evicted.nodes] == [
        ("n4", 0.0, ()),
        ("x", 0.5, ("rx",)),
    ]
    assert list(graph.nodes) == ["n0", "n1", "n2", "n3"]
    assert "rx" not in graph.relationships
    data = assert_valid_report(report)
    assert data["evicted"] == {
        "nodes": [
            {"id": "n4", "weight": 0.0, "relationships": []},
            {"id": "x", "weight": 0.5, "relationships": ["rx"]},
        ],
        "node_count": 2,
        "relationship_count": 1,
    }
    assert data["after"] == {"nodes": 4, "relationships": 3}


def test_lightest_eviction_at_the_relationship_cap_skips_isolated_nodes() -> None:
    graph = chain_graph(GraphCaps(max_relationships=2, eviction="lightest"))
    report = graph.add_relationship(GraphRelationship("r9", "n3", "n2", "BACK", 0.25))
    # 4 relationships, cap 2. n4 (weight 0) frees none and stays; n0 (1) and n1 (3) go.
    assert [(n.id, n.weight, n.relationships) for n in report.evicted.nodes] == [
        ("n0", 1.0, ("r0",)),
        ("n1", 3.0, ("r1",)),
    ]
    assert list(graph.nodes) == ["n2", "n3", "n4"]
    assert list(graph.relationships) == ["r2", "r9"]
    assert_valid_report(report)


def test_eviction_ties_break_by_id() -> None:
    nodes = tuple(GraphNode(node_id) for node_id in ("c", "a", "b"))
    graph = Graph(GraphSnapshot(nodes), caps=GraphCaps(max_nodes=1, eviction="lightest"))
    report = graph.replace(GraphSnapshot(nodes))
    assert [n.id for n in report.evicted.nodes] == ["a", "b"]
    assert list(graph.nodes) == ["c"]


def test_caps_must_be_whole_numbers() -> None:
    with pytest.raises(GraphError, match="max_nodes must be a whole number >= 0"):
        GraphCaps(max_nodes=-1)


# -- import -----------------------------------------------------------------------------------


def test_import_replaces_the_graph_and_reports_what_it_holds() -> None:
    graph = base_graph()
    report = graph.replace(load_snapshot(SAMPLES / "valid.json").snapshot(), source="valid.json")
    assert sorted(graph.nodes) == ["alice", "key", "ops", "vault"]
    data = assert_valid_report(report)
    assert data == {
        "kind": "graph-import",
        "version": 1,
        "source": "valid.json",
        "caps": {"max_nodes": 1_000_000, "max_relationships": 5_000_000, "eviction": "none"},
        "before": {"nodes": 2, "relationships": 1},
        "after": {"nodes": 4, "relationships": 3},
        "labels": {"Person": 1, "Place": 1, "Secret": 1, "Team": 1},
        "types": {"MEMBER_OF": 1, "OPENS": 1, "OWNS": 1},
        "total_weight": 4.5,
        "warnings": 0,
        "evicted": {"nodes": [], "node_count": 0, "relationship_count": 0},
    }


def test_import_of_an_invalid_snapshot_leaves_the_graph_untouched() -> None:
    graph = base_graph()
    before = graph.snapshot()
    with pytest.raises(GraphError, match="import refused"):
        graph.replace({"nodes": [{"id": "a"}, {"id": "a"}], "relationships": []})
    assert graph.snapshot() == before


def test_import_over_a_cap_is_refused_or_evicts() -> None:
    snapshot = chain_graph(GraphCaps()).snapshot()
    graph = base_graph(max_nodes=3)
    with pytest.raises(GraphError, match="import refused: the graph would hold 5 nodes"):
        graph.replace(snapshot)
    assert sorted(graph.nodes) == ["a", "b"]
    graph.caps = GraphCaps(max_nodes=3, eviction="lightest")
    report = graph.replace(snapshot)
    assert [n.id for n in report.evicted.nodes] == ["n4", "n0"]
    assert_valid_report(report)


def test_report_key_order_is_stable() -> None:
    report = base_graph().merge(INCOMING)
    assert list(report.to_dict()) == [
        "kind",
        "version",
        "source",
        "policy",
        "caps",
        "before",
        "after",
        "nodes",
        "relationships",
        "conflicts",
        "evicted",
    ]
    assert list(report.to_dict()["nodes"]) == [
        "added",
        "updated",
        "unchanged",
        "added_ids",
        "updated_ids",
    ]


def test_merge_snapshot_files_with_the_samples() -> None:
    graph, report = merge_snapshot_files(
        SAMPLES / "valid.json", SAMPLES / "delta.json", MergePolicy("merge", "sum")
    )
    data = assert_valid_report(report)
    assert data["source"] == str(SAMPLES / "delta.json")
    assert data["nodes"]["added_ids"] == ["bob"] and data["nodes"]["updated_ids"] == ["alice"]
    assert graph.relationships["r1"].weight == 3
    assert report.summary() == (
        "merged: nodes 1 added, 1 updated, 1 unchanged; relationships 1 added, 1 updated, 0 unchanged; "
        "2 conflicts (merge, weights sum); graph now 5 nodes, 4 relationships"
    )


def test_report_schema_rejects_a_wrong_report() -> None:
    data = base_graph().merge(INCOMING).to_dict()
    data["conflicts"][0]["resolution"] = "coin_flip"
    assert not report_validator().is_valid(data)
