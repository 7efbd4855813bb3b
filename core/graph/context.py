"""The working graph in a compaction run: load or merge it, then render it after compaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.counting.counter import MessageCounter
from core.engine.pipeline import GraphStep
from core.graph import (
    Graph,
    GraphContextConfig,
    MergePolicy,
    apply_graph_message,
    import_snapshot_file,
    merge_snapshot_files,
    render_graph_text,
)
from core.graph.merge import ConflictPolicy, WeightRule
from core.messages import Message


@dataclass
class WorkingGraph:
    """A graph ready to render, with the import or merge report that produced it."""

    graph: Graph
    report: dict[str, Any]
    summary: str
    context: GraphContextConfig = field(default_factory=GraphContextConfig)


def load_working_graph(
    snapshot: str,
    *,
    merge: str | None = None,
    policy: str = "merge",
    weights: str = "incoming",
    context: GraphContextConfig | None = None,
) -> WorkingGraph:
    """Import ``snapshot``, or merge ``merge`` into it; invalid input raises before anything runs."""
    if merge is not None:
        graph, merge_report = merge_snapshot_files(snapshot, merge, MergePolicy(ConflictPolicy(policy), WeightRule(weights)))
        report, summary = merge_report.to_dict(), merge_report.summary()
    else:
        graph, import_report = import_snapshot_file(snapshot)
        report, summary = import_report.to_dict(), import_report.summary()
    return WorkingGraph(graph, report, summary, context or GraphContextConfig())


def graph_step(working: WorkingGraph, marker: str) -> GraphStep:
    """Renders the graph into the compacted messages: after compaction, never counted against it."""

    def step(messages: list[Message], counter: MessageCounter) -> tuple[list[Message], dict[str, Any]]:
        text = render_graph_text(working.graph, working.context, marker)
        placement = apply_graph_message([m.data for m in messages], text, marker=marker)
        by_identity = {id(m.data): m for m in messages}
        previous = messages[placement.index] if placement.action == "replaced" and placement.index is not None else None
        result: list[Message] = []
        for data in placement.messages:
            message = by_identity.get(id(data))
            if message is None:  # the new or replaced graph message
                message = counter.count_message(Message(data=data, line=previous.line if previous else None))
            result.append(message)
        shown = text is not None and placement.index is not None
        tokens = result[placement.index].tokens if shown else 0  # type: ignore[index]
        summary = {
            "action": placement.action,
            "index": placement.index,
            "tokens": tokens,
            "nodes": len(working.graph.nodes),
            "relationships": len(working.graph.relationships),
            "summary": f"{working.summary}; graph message {placement.action}, {tokens:,} tokens",
            "report": working.report,
        }
        return result, summary

    return step
