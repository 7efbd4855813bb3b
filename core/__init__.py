"""compact's library: read, count and compact LLM transcripts. Never prints."""

from core.api import compact_file, count_file, open_counter
from core.config import MemoryConfig, StrategySpec, load_config
from core.errors import CompactError
from core.messages import Message
from core.pipeline import CompactionResult, Seams, compact
from core.transcript import read_transcript, write_transcript

__all__ = [
    "CompactError",
    "CompactionResult",
    "MemoryConfig",
    "Message",
    "Seams",
    "StrategySpec",
    "compact",
    "compact_file",
    "count_file",
    "load_config",
    "open_counter",
    "read_transcript",
    "write_transcript",
]
