"""The public names of ``core.graph``, gathered from its modules (``core.graph`` serves them)."""

from core.graph.caps import Evicted, EvictedNode, GraphCaps
from core.graph.files import (
    dump_snapshot_chunks,
    dumps_snapshot,
    import_snapshot_file,
    load_snapshot,
    merge_snapshot_files,
    read_snapshot,
    save_snapshot,
)
from core.graph.findings import Finding, ValidationResult
from core.graph.graph import Graph
from core.graph.merge import MergePolicy
from core.graph.model import GraphNode, GraphRelationship, GraphSnapshot
from core.graph.options import (
    DEFAULT_MARKER,
    ConflictPolicy,
    Eviction,
    GraphDirection,
    WeightRule,
)
from core.graph.parsing import parse_json
from core.graph.placement import GraphPlacement, apply_graph_message, is_graph_message
from core.graph.render import GraphContextConfig, render_graph_text, select
from core.graph.reports import ChangeSet, Conflict, GraphImportReport, MergeReport
from core.graph.validate import validate_document, validate_snapshot_file

__all__ = [
    "DEFAULT_MARKER",
    "ChangeSet",
    "Conflict",
    "ConflictPolicy",
    "Evicted",
    "EvictedNode",
    "Eviction",
    "Finding",
    "Graph",
    "GraphCaps",
    "GraphContextConfig",
    "GraphDirection",
    "GraphImportReport",
    "GraphNode",
    "GraphPlacement",
    "GraphRelationship",
    "GraphSnapshot",
    "MergePolicy",
    "MergeReport",
    "ValidationResult",
    "WeightRule",
    "apply_graph_message",
    "dump_snapshot_chunks",
    "dumps_snapshot",
    "import_snapshot_file",
    "is_graph_message",
    "load_snapshot",
    "merge_snapshot_files",
    "parse_json",
    "read_snapshot",
    "render_graph_text",
    "save_snapshot",
    "select",
    "validate_document",
    "validate_snapshot_file",
]
