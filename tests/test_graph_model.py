"""Model round trips, the snapshot file format, atomic saves, and the schema's fast check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import core.io.staged
from core.graph import (
    Graph,
    GraphNode,
    GraphRelationship,
    GraphSnapshot,
    dumps_snapshot,
    load_snapshot,
    save_snapshot,
    validate_document,
)
from core.graph.checkers import SNAPSHOT_SCHEMA, snapshot_checkers
from core.io.schema_loader import load_schema

SAMPLES = Path(__file__).parent.parent / "sample_transcripts" / "graph"

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
ids = st.text(min_size=1, max_size=6)


@st.composite
def snapshots(draw: Any) -> GraphSnapshot:
    node_ids = draw(st.lists(ids, unique=True, max_size=8))
    nodes = tuple(
        GraphNode(
            i,
            tuple(draw(st.lists(ids, unique=True, max_size=3))),
            draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3)),
        )
        for i in node_ids
    )
    rels = []
    if node_ids:
        for index in range(draw(st.integers(0, 10))):
            rels.append(
                GraphRelationship(
                    f"r{index}",
                    draw(st.sampled_from(node_ids)),
                    draw(st.sampled_from(node_ids)),
                    draw(ids),
                    draw(st.integers(-100, 100) | st.floats(-1e9, 1e9, allow_nan=False)),
                    draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3)),
                )
            )
    return GraphSnapshot(nodes, tuple(rels))


class TestGraphSnapshotRoundTrip:
    @settings(max_examples=150, deadline=None)
    @given(snapshots())
    def test_dumps_then_validate_gives_the_same_snapshot(self, snapshot: GraphSnapshot) -> None:
        data = dumps_snapshot(snapshot)
        result = validate_document(orjson.loads(data))
        assert result.ok, result.problems
        assert result.snapshot == snapshot
        assert dumps_snapshot(result.snapshot) == data

    def test_to_dict_writes_every_field_in_wire_order(self) -> None:
        snapshot = GraphSnapshot((GraphNode("a"),), (GraphRelationship("r", "a", "a", "T"),))
        data = snapshot.to_dict()
        assert list(data) == ["nodes", "relationships"]
        assert list(data["nodes"][0]) == ["id", "labels", "properties"]
        assert list(data["relationships"][0]) == [
            "id",
            "from",
            "to",
            "type",
            "weight",
            "properties",
        ]
        assert GraphSnapshot.from_dict(data) == snapshot


class TestSnapshotFile:
    def test_one_item_per_line(self, tmp_path: Path) -> None:
        graph = load_snapshot(SAMPLES / "valid.json")
        save_snapshot(graph, tmp_path / "out.json")
        lines = (tmp_path / "out.json").read_text().splitlines()
        assert lines[:3] == [
            "{",
            '  "nodes": [',
            '    {"id":"alice","labels":["Person"],"properties":{"email":"ops@example.com"}},',
        ]
        assert lines[-3:] == [
            "    " + orjson.dumps(graph.relationships["r3"].to_dict()).decode(),
            "  ]",
            "}",
        ]
        assert load_snapshot(tmp_path / "out.json").snapshot() == graph.snapshot()

    def test_empty_graph(self) -> None:
        assert dumps_snapshot(Graph()) == b'{\n  "nodes": [],\n  "relationships": []\n}\n'

    def test_save_is_atomic(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        target = tmp_path / "graph.json"
        target.write_bytes(b"old")

        def broken_chunks(graph: Any) -> Any:
            yield b"{\n"
            raise RuntimeError("disk full")

        monkeypatch.setattr("core.graph.files.dump_snapshot_chunks", broken_chunks)
        with pytest.raises(RuntimeError):
            save_snapshot(Graph(), target)
        assert target.read_bytes() == b"old"
        assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]

    def test_save_uses_the_shared_atomic_writer(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        calls = []
        real = core.io.staged.atomic_write_chunks

        def spy(path: Any, chunks: Any) -> None:
            calls.append(path)
            real(path, chunks)

        monkeypatch.setattr("core.graph.files.atomic_write_chunks", spy)
        save_snapshot(Graph(), tmp_path / "g.json")
        assert calls == [tmp_path / "g.json"]


class TestSchemaFastCheck:
    """The compiled predicate and jsonschema must give the same verdict on any item."""

    keys = st.sampled_from(
        ["id", "from", "to", "type", "weight", "properties", "labels", "lables", ""]
    )

    @settings(max_examples=400, deadline=None)
    @given(
        st.dictionaries(keys, json_values | st.lists(st.text(max_size=2), max_size=3), max_size=7)
        | json_values
    )
    def test_same_verdict_as_jsonschema(self, item: Any) -> None:
        schema = load_schema(SNAPSHOT_SCHEMA)
        _, node_checker, rel_checker = snapshot_checkers()
        for name, checker in (("node", node_checker), ("relationship", rel_checker)):
            reference = Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})
            assert checker.fast is not None
            assert checker.fast(item) == reference.is_valid(item), (name, item)

    def test_whole_document_schema_agrees_on_the_samples(self) -> None:
        validator = Draft202012Validator(load_schema(SNAPSHOT_SCHEMA))
        for name in ("valid.json", "delta.json"):
            assert validator.is_valid(orjson.loads((SAMPLES / name).read_bytes()))

    def test_an_unknown_keyword_falls_back_to_jsonschema(self) -> None:
        from core.graph.checkers import ItemChecker

        checker = ItemChecker({}, {"type": "string", "pattern": "^a"})
        assert checker.fast is None
        assert checker.is_valid("abc") and not checker.is_valid("b")
