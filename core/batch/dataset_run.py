"""Conversation-per-line datasets: JSONL whose every line is one whole conversation.

A line is an object with a ``messages`` list of chat messages beside any other
fields (``{"task_id": 3, "reward": 1.0, "messages": [...]}``, as training sets
and evaluation logs keep them), or a ShareGPT conversation
``{"conversations": [{"from", "value"}...], "tools"?, "system"?, ...}``
(LLaMA-Factory's format); one dataset may mix the two. Each conversation is
compacted on its own budget with :func:`core.engine.pipeline.compact`; the other
fields are kept, in their order, and a conversation nothing changed is written
back as its original line bytes. A ShareGPT line is decoded and written back
by the ShareGPT codec (core.formats.sharegpt), exactly as a one-conversation
ShareGPT file is. The report sums the conversations and holds a row per
conversation.

With ``skip_invalid`` a line that is not a valid conversation (malformed
JSON, or any invalid message in it) is left out of the output and listed in
``skipped_lines``; otherwise it is an error naming the line and the message.

Detection is the formats detector's (core.formats.sniff): a first non-blank line
with a list ``messages`` and no ``role`` is a dataset; a ShareGPT conversation line is one when a second conversation line follows it (a
single ShareGPT conversation is one transcript). A file starting with ``[`` is a
JSON array: a dataset when its elements are conversations, and
:func:`compact_dataset_lines` then takes the elements as the lines (element N is
line N) and writes them back as JSONL, one element per line (core.formats explains
why). Anything else is read as a transcript.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from core.config import MemoryConfig
from core.counting.counter import MessageCounter
from core.counting.tokenizers import EncoderChoice
from core.engine.pipeline import BUDGET, compact
from core.engine.seams import Seams
from core.engine.structure import ToolRuleTally
from core.errors import InputError
from core.formats.base import Decoded, Line
from core.formats.base import number as number_messages
from core.formats.dataset import is_chat_conversation, is_conversation
from core.io import jsonio
from core.io.rawinput import naming_skip_invalid, numbered_lines  # the one reader of raw input
from core.io.transcript import check_message  # the transcript reader's own message checks
from core.messages import Message, wire_message
from core.report import ConversationRow, DatasetReport, EncoderReport, summary_failed

DATASET = "dataset"
TRANSCRIPT = "transcript"


def looks_like_dataset(line: bytes | str) -> bool:
    """True when ``line`` is a whole conversation: a list ``messages`` and no ``role``, or a ShareGPT ``conversations`` list."""
    try:
        data = jsonio.loads(line)
    except orjson.JSONDecodeError:
        return False
    return is_conversation(data)


class DatasetCompactor:
    """Compacts the conversations of one dataset, line by line, and sums up what it did.

    Only one conversation is in memory at a time: feed it lines with
    :meth:`line` and write what it returns; :meth:`report` gives the summary.
    """

    def __init__(
        self,
        name: str,
        config: MemoryConfig,
        *,
        counter: MessageCounter,
        encoder: EncoderChoice,
        mode: str = BUDGET,
        repair: bool = False,
        skip_invalid: bool = False,
        seams: Seams | None = None,
        note_unpinned_tools: bool = False,
    ) -> None:
        self.name = name
        self.config = config
        self.counter = counter
        self.encoder = encoder
        self.mode = mode
        self.repair = repair
        self.skip_invalid = skip_invalid
        self.seams = seams
        self.rows: list[ConversationRow] = []
        self.skipped_lines: list[dict[str, Any]] = []
        self.tool_rules = ToolRuleTally(config.keep_rules())
        self.note_unpinned_tools = note_unpinned_tools  # (a batch input) else an error at the end

    def line(self, number: int, raw: bytes) -> bytes | None:
        """The output bytes (without a line end) for the conversation on line ``number``; None for a line
        ``skip_invalid`` leaves out."""
        try:
            conversation = _parse_conversation(raw, self.name, number)
            if is_chat_conversation(conversation):
                messages = self._messages(conversation, number)
                decoded = None
            else:
                decoded = self._sharegpt(conversation, number, raw)
                messages = decoded.messages
        except InputError as exc:
            if not self.skip_invalid:
                raise naming_skip_invalid(exc) from None
            self.skipped_lines.append({"line": number, "error": exc.what})
            return None
        self.tool_rules.add(messages)
        if not messages:
            self.rows.append(ConversationRow(number, 0, 0, 0, 0, changed=False, over_budget=False, strategies=[]))
            return raw
        result = compact(
            messages, self.config.run_settings(), self.counter, encoder=self.encoder, mode=self.mode, repair=self.repair,
            seams=self.seams, source=f"{self.name}:{number}",
        )
        report = result.compression
        if report is None:  # (compact always reports)
            raise AssertionError("compact returned no report")
        changed = not (
            report.prompt_cache["prefix_messages"] == len(messages) == len(result.messages)
        )
        self.rows.append(ConversationRow(
            number,
            report.before.messages, report.after.messages,
            report.before.tokens, report.after.tokens,
            changed=changed, over_budget=report.over_budget, strategies=report.acted(),
            summary_failed=summary_failed(report.actions, self.config.summarizer_calls_a_model),
        ))
        if not changed:
            return raw
        if decoded is not None:
            from core.formats import sharegpt

            [out_line] = list(sharegpt.CODEC.encode(decoded, result.messages))  # one line in, one line out
            return bytes(out_line) if isinstance(out_line, (bytes, memoryview)) else jsonio.dumps(out_line)
        out = dict(conversation)  # replacing a key's value keeps its place among the others
        out["messages"] = [wire_message(m.data) for m in result.messages]
        return jsonio.dumps(out)

    def _sharegpt(self, conversation: dict[str, Any], number: int, raw: bytes) -> Decoded:
        """A ShareGPT conversation line read by the ShareGPT codec, as a one-line file of that format."""
        from core.formats import sharegpt

        line = Line(number, conversation, raw)
        messages = number_messages(sharegpt.CODEC.decode([line], self.name))
        return Decoded(self.name, sharegpt.CODEC.name, [line], messages)

    def _messages(self, conversation: dict[str, Any], number: int) -> list[Message]:
        messages = []
        for index, data in enumerate(conversation["messages"], start=1):
            if not isinstance(data, dict):
                raise InputError(f"message {index} is {_kind(data)}, not a message object",
                                 path=self.name, line=number)
            try:
                check_message(data, self.name, number)
            except InputError as exc:
                raise InputError(f"message {index}: {exc.what}", path=self.name, line=number, fix=exc.fix) from None
            messages.append(Message(data=data, line=index))
        return messages

    def finish(self) -> None:
        """Once every line is in: a `tool:` keep rule that pinned nothing in any conversation is an error."""
        if not self.note_unpinned_tools:
            self.tool_rules.raise_unpinned(self.name, dataset=True)

    def unpinned_rules(self) -> dict[str, str]:
        return self.tool_rules.reasons(dataset=True)

    def report(self) -> DatasetReport:
        return DatasetReport(self.name, self.mode, EncoderReport.of(self.encoder), list(self.rows),
                             list(self.skipped_lines))


def compact_dataset_lines(
    lines: Iterable[bytes], compactor: DatasetCompactor
) -> Iterator[bytes]:
    """The output chunks (each line and its line end) for the raw lines of a dataset file.

    A file that is a JSON array (its first non-blank byte ``[``) is parsed
    whole and its elements are the lines: element N is line N, written back
    as one JSONL line.
    """
    seen = False
    for number, raw in numbered_lines(lines, compactor.name):
        seen = True
        out = compactor.line(number, raw)
        if out is not None:
            yield out
            yield b"\n"
    if not seen:
        raise InputError("the file is empty; a dataset needs at least one conversation", path=compactor.name)
    compactor.finish()  # (raised here, the staged output is thrown away)


def compact_dataset_bytes(data: bytes, name: str, config: MemoryConfig, **options: Any) -> tuple[bytes, dict[str, Any]]:
    """Compact every conversation of a dataset held in memory: (output bytes, the dataset report as JSON data).

    ``options`` are :class:`DatasetCompactor`'s (counter, encoder, mode, repair, skip_invalid, seams).
    """
    compactor = DatasetCompactor(name, config, **options)
    output = b"".join(compact_dataset_lines(data.splitlines(keepends=True), compactor))
    return output, compactor.report().to_dict()


def _parse_conversation(raw: bytes, name: str, number: int) -> dict[str, Any]:
    try:
        data = jsonio.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {str(exc.msg).split(':')[0]}", path=name, line=number,
                         column=exc.colno, fix="each line must be one complete JSON object") from None
    if not is_conversation(data):
        raise InputError(
            f"{_kind(data)}, not a conversation", path=name, line=number,
            fix='each line of a dataset must be an object with a "messages" list (and no "role") '
                'or a ShareGPT "conversations" list',
        )
    return data


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object without a messages or conversations list" if "role" not in value else "a single message"
    return jsonio.kind_name(value) or "null"
