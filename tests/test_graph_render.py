"""Rendering the graph message (deterministic, capped, focused) and placing it in a transcript."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import GraphError
from core.graph import (
    Graph,
    GraphContextConfig,
    GraphNode,
    GraphRelationship,
    GraphSnapshot,
    apply_graph_message,
    render_graph_text,
)

MARKER = "CUCA graph memory:"


def sample() -> Graph:
    return Graph.from_dict(
        {
            "nodes": [
                {"id": "alice", "labels": ["Person"], "properties": {"email": "ops@example.com"}},
                {"id": "vault", "labels": ["Place"], "properties": {"city": "Lisbon"}},
                {"id": "key", "labels": ["Secret"], "properties": {}},
                {"id": "ops", "labels": [], "properties": {}},
                {"id": "New York", "labels": ["Place"], "properties": {}},
            ],
            "relationships": [
                {
                    "id": "r1",
                    "from": "alice",
                    "to": "vault",
                    "type": "OWNS",
                    "weight": 2,
                    "properties": {"since": 2020},
                },
                {
                    "id": "r2",
                    "from": "key",
                    "to": "vault",
                    "type": "OPENS",
                    "weight": 1.5,
                    "properties": {},
                },
                {
                    "id": "r3",
                    "from": "alice",
                    "to": "ops",
                    "type": "MEMBER_OF",
                    "weight": 1,
                    "properties": {},
                },
                {
                    "id": "r4",
                    "from": "ops",
                    "to": "New York",
                    "type": "BASED_IN",
                    "weight": 0.25,
                    "properties": {},
                },
            ],
        }
    )


def test_render_shows_heaviest_first() -> None:
    assert render_graph_text(sample(), GraphContextConfig()) == 'CUCA graph memory: 5 nodes, 4 relationships.\nNodes:\n- vault [Place] {"city":"Lisbon"}\n- alice [Person] {"email":"ops@example.com"}\n- key [Secret]\n- ops\n- "New York" [Place]\nRelationships:\n- alice -OWNS-> vault (weight 2) {"since":2020}\n- key -OPENS-> vault (weight 1.5)\n- alice -MEMBER_OF-> ops (weight 1)\n- ops -BASED_IN-> "New York" (weight 0.25)'


def test_render_says_what_it_left_out() -> None:
    text = render_graph_text(sample(), GraphContextConfig(max_nodes=2, max_relationships=1))
    assert text == 'CUCA graph memory: 5 nodes, 4 relationships.\nNodes:\n- vault [Place] {"city":"Lisbon"}\n- alice [Person] {"email":"ops@example.com"}\nRelationships:\n- alice -OWNS-> vault (weight 2) {"since":2020}\nLeft out: 3 nodes and 3 relationships over the limits (max_nodes 2, max_relationships 1; lightest left out first).'


@pytest.mark.parametrize(
    ("direction", "depth", "nodes"),
    [
        ("out", 1, ["alice", "vault", "ops"]),
        ("in", 1, ["alice"]),
        ("both", 0, ["alice"]),
        ("out", 2, ["alice", "vault", "ops", "New York"]),
    ],
)
def test_focus_direction_and_depth(direction: str, depth: int, nodes: list[str]) -> None:
    config = GraphContextConfig(focus=("alice",), direction=direction, depth=depth)  # type: ignore[arg-type]
    text = render_graph_text(sample(), config)
    assert text is not None
    assert f"Focus: alice (direction {direction}, depth {depth})." in text
    shown = [
        line[2:].split(" ")[0].strip('"')
        for line in text.splitlines()
        if line.startswith("- ") and "->" not in line
    ]
    assert shown == [n.split(" ")[0] for n in nodes]
    if len(nodes) < 5:
        assert "outside the focus." in text


def test_focus_on_an_unknown_node_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(
        GraphError, match=r"focus node 'alise' is not in the graph \(did you mean 'alice'"
    ):
        render_graph_text(sample(), GraphContextConfig(focus=("alise",)))


def test_property_text_is_capped() -> None:
    graph = Graph.from_dict(
        {"nodes": [{"id": "a", "properties": {"text": "x" * 500}}], "relationships": []}
    )
    text = render_graph_text(graph, GraphContextConfig(max_property_chars=20))
    assert text is not None
    assert text.splitlines()[2] == '- a {"text":"' + "x" * 10 + "…"  # 20 characters


def test_empty_graph_renders_nothing_and_the_marker_is_configurable() -> None:
    assert render_graph_text(Graph(), GraphContextConfig()) is None
    text = render_graph_text(
        sample(), GraphContextConfig(max_nodes=0, max_relationships=0), marker="MEMO:"
    )
    assert text is not None and text.startswith("MEMO: 5 nodes")
    with pytest.raises(GraphError):
        render_graph_text(sample(), GraphContextConfig(), marker="")
    with pytest.raises(GraphError, match="max_nodes must be a whole number"):
        GraphContextConfig(max_nodes=-1)


# -- determinism (Hypothesis) ---------------------------------------------------------------------

ids = st.text(alphabet="abcdef", min_size=1, max_size=3)
weights = st.sampled_from([0.1, 0.2, 0.3, 0.7, 1, 2, -1]) | st.floats(-1e6, 1e6, allow_nan=False)
properties = st.dictionaries(
    st.sampled_from(["k", "q", "z"]), st.integers(-3, 3) | st.text(max_size=3), max_size=3
)


@st.composite
def snapshots(draw: Any) -> GraphSnapshot:
    node_ids = draw(st.lists(ids, unique=True, max_size=10))
    nodes = tuple(
        GraphNode(
            node_id,
            tuple(draw(st.lists(st.sampled_from("ABC"), unique=True, max_size=3))),
            draw(properties),
        )
        for node_id in node_ids
    )
    rels: list[GraphRelationship] = []
    if node_ids:
        for index in range(draw(st.integers(0, 20))):
            rels.append(
                GraphRelationship(
                    f"r{index}",
                    draw(st.sampled_from(node_ids)),
                    draw(st.sampled_from(node_ids)),
                    draw(st.sampled_from(["KNOWS", "OWNS"])),
                    draw(weights),
                    draw(properties),
                )
            )
    return GraphSnapshot(nodes, tuple(rels))


def shuffled(snapshot: GraphSnapshot, rng: random.Random) -> GraphSnapshot:
    def mix_dict(data: Any) -> dict[str, Any]:
        items = list(data.items())
        rng.shuffle(items)
        return dict(items)

    nodes = [
        GraphNode(n.id, tuple(rng.sample(n.labels, len(n.labels))), mix_dict(n.properties))
        for n in snapshot.nodes
    ]
    rels = [
        GraphRelationship(r.id, r.source, r.target, r.type, r.weight, mix_dict(r.properties))
        for r in snapshot.relationships
    ]
    rng.shuffle(nodes)
    rng.shuffle(rels)
    return GraphSnapshot(tuple(nodes), tuple(rels))


@settings(max_examples=200, deadline=None)
@given(
    snapshots(),
    st.randoms(use_true_random=False),
    st.integers(0, 6),
    st.integers(0, 8),
    st.booleans(),
    st.sampled_from(["out", "in", "both"]),
    st.integers(0, 2),
)
def test_same_graph_in_any_order_renders_identically(
    snapshot: GraphSnapshot,
    rng: random.Random,
    max_nodes: int,
    max_rels: int,
    focused: bool,
    direction: str,
    depth: int,
) -> None:
    focus = (snapshot.nodes[0].id,) if focused and snapshot.nodes else ()
    config = GraphContextConfig(max_nodes, max_rels, focus, direction, depth)  # type: ignore[arg-type]
    first = render_graph_text(Graph(snapshot), config)
    assert render_graph_text(Graph(shuffled(snapshot, rng)), config) == first
    if first is not None:
        assert first.startswith(MARKER)
        shown = sum(1 for line in first.splitlines() if line.startswith("- "))
        assert shown <= max_nodes + max_rels


# -- placement --------------------------------------------------------------------------------


def transcript() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "extra": 1},
    ]


def test_inserted_right_after_the_first_system_message() -> None:
    messages = transcript()
    placement = apply_graph_message(messages, f"{MARKER} one")
    assert placement.action == "inserted" and placement.index == 1
    assert placement.messages[1] == {"role": "system", "content": f"{MARKER} one"}
    assert [m for i, m in enumerate(placement.messages) if i != 1] == messages
    assert all(
        a is b
        for a, b in zip([placement.messages[0], *placement.messages[2:]], messages, strict=True)
    )
    assert len(messages) == 3  # the input list is not modified


def test_inserted_at_the_top_without_a_system_message() -> None:
    messages = transcript()[1:]
    placement = apply_graph_message(messages, f"{MARKER} one")
    assert (placement.action, placement.index) == ("inserted", 0)
    assert placement.messages[1] is messages[0]


def test_a_later_run_replaces_it_in_place() -> None:
    first = apply_graph_message(transcript(), f"{MARKER} one").messages
    first.append({"role": "user", "content": "more"})
    placement = apply_graph_message(first, f"{MARKER} two")
    assert (placement.action, placement.index) == ("replaced", 1)
    assert placement.messages[1] == {"role": "system", "content": f"{MARKER} two"}
    assert len(placement.messages) == len(first)
    assert all(placement.messages[i] is first[i] for i in range(len(first)) if i != 1)


def test_unchanged_when_the_text_is_the_same() -> None:
    first = apply_graph_message(transcript(), f"{MARKER} one").messages
    placement = apply_graph_message(first, f"{MARKER} one")
    assert (placement.action, placement.index) == ("unchanged", 1)
    assert all(a is b for a, b in zip(placement.messages, first, strict=True))


def test_removed_when_the_graph_is_empty() -> None:
    first = apply_graph_message(transcript(), f"{MARKER} one").messages
    placement = apply_graph_message(first, render_graph_text(Graph(), GraphContextConfig()))
    assert (placement.action, placement.index, placement.text) == ("removed", 1, None)
    assert placement.messages == transcript()
    absent = apply_graph_message(transcript(), None)
    assert (absent.action, absent.index) == ("absent", None)


def test_only_a_system_message_with_string_content_and_the_marker_counts() -> None:
    messages = [
        {"role": "user", "content": f"{MARKER} typed by the user"},
        {"role": "system", "content": [{"type": "text", "text": f"{MARKER} parts"}]},
    ]
    placement = apply_graph_message(messages, f"{MARKER} new")
    assert (placement.action, placement.index) == ("inserted", 2)


def test_extra_graph_messages_are_removed_and_other_fields_kept() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "system", "content": f"{MARKER} old", "name": "graph"},
        {"role": "user", "content": "U"},
        {"role": "system", "content": f"{MARKER} stray"},
    ]
    placement = apply_graph_message(messages, f"{MARKER} new")
    assert placement.action == "replaced"
    assert placement.messages == [
        {"role": "system", "content": "S"},
        {"role": "system", "content": f"{MARKER} new", "name": "graph"},
        {"role": "user", "content": "U"},
    ]


def test_custom_marker_and_text_must_start_with_it() -> None:
    placement = apply_graph_message(transcript(), "MEMO: x", marker="MEMO:")
    assert placement.action == "inserted"
    with pytest.raises(GraphError, match="must start with the marker"):
        apply_graph_message(transcript(), "no marker here")


def test_render_then_apply_end_to_end() -> None:
    graph = sample()
    text = render_graph_text(graph, GraphContextConfig())
    once = apply_graph_message(transcript(), text)
    twice = apply_graph_message(once.messages, render_graph_text(graph, GraphContextConfig()))
    assert twice.action == "unchanged"
    graph.clear()
    gone = apply_graph_message(twice.messages, render_graph_text(graph, GraphContextConfig()))
    assert gone.action == "removed" and gone.messages == transcript()
