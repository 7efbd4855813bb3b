"""compact's library: read, count and compact LLM transcripts. Never prints."""

from core.api import RunOptions, compact_file, compact_source, count_file, open_counter
from core.config import MemoryConfig, StrategySpec, load_config
from core.engine.pipeline import CompactionResult, Seams, compact
from core.errors import CompactError
from core.io.transcript import read_transcript, write_transcript
from core.messages import Message

__all__ = [
    "CompactError",
    "CompactionResult",
    "MemoryConfig",
    "Message",
    "RunOptions",
    "Seams",
    "StrategySpec",
    "compact",
    "compact_file",
    "compact_source",
    "count_file",
    "load_config",
    "open_counter",
    "read_transcript",
    "write_transcript",
]
