"""ShareGPT conversations: ``{"from", "value"}`` turns, with ``function_call`` and ``observation`` turns.

Two JSONL shapes are read (LLaMA-Factory's ``sharegpt`` dataset format, as in
its ``data/glaive_toolcall_en_demo.json``):

* one turn per line: ``{"from": "human", "value": "..."}``, the whole file one conversation;
* one conversation per line: ``{"conversations": [turns], "system"?: str, "tools"?: str, ...}``.
  A file holding several such lines is a dataset, not one transcript:
  core.formats reads it as the ``dataset`` format and core.batch.dataset_run compacts
  each line on its own budget with this codec (decoding and encoding that one
  line). A single conversation line is one transcript, this format.

The real file (``glaive_toolcall_en_demo.json``) is a pretty-printed JSON array
of such conversations: core.formats reads an array's elements as lines, so it
is a dataset too, written back as JSONL.

``from``: ``human``/``user`` -> user, ``gpt``/``assistant`` -> assistant,
``system`` -> system, ``function_call`` (``value`` = JSON ``{"name", "arguments"}``,
or a list of them for parallel calls) -> an assistant tool call,
``observation``/``tool`` -> the tool result of the oldest call still
unanswered before it. ShareGPT has no call ids, so they are made up from the
place of the call: ``call_<line>`` (one turn per line) or ``call_<line>_<turn>``
(one conversation per line), ``_<k>`` added for each of parallel calls; an
observation no call is waiting for gets an id of its own (an orphan). A top-level
``system`` is the first, system, message; ``tools`` and unknown fields stay as they
are, and turns with an unknown ``from`` pass through untouched in place.

Writing back keeps untouched lines (and turns) as they were; messages compact
adds become ``system`` turns. ``--to sharegpt`` writes one conversation line;
what it cannot carry: call ids, non-text parts (thinking, images), and
``name`` on user messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from core.errors import InputError
from core.formats.base import (
    Codec,
    Decoded,
    Item,
    Line,
    Losses,
    Rebuild,
    line_error,
    note_failed,
    origin_message,
    write_back,
)
from core.io import jsonio
from core.messages import Message, custom_arguments

ROLE_OF = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
           "function_call": "call", "observation": "tool", "tool": "tool"}
FROM_OF = {"user": "human", "assistant": "gpt", "system": "system", "developer": "system"}


class ShareGPT(Codec):
    name = "sharegpt"
    title = "ShareGPT"

    def accepts(self, data: dict[str, Any]) -> bool:
        if "role" in data or "type" in data or "messages" in data:
            return False
        return isinstance(data.get("conversations"), list) or (isinstance(data.get("from"), str) and "value" in data)

    def evidence(self, data: dict[str, Any]) -> bool:
        return isinstance(data.get("conversations"), list) or data.get("from") in ROLE_OF

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        conversations = _conversation_lines(lines, path)
        if conversations:
            return _Reader(path, conversations[0]).conversation()
        reader = _Reader(path, None)
        messages: list[Message] = []
        for line in lines:
            if line.data is None:
                continue
            message = reader.turn(line.data, line, None)
            if message is not None:
                messages.append(message)
        return messages

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[Item]:
        conversations = _conversation_lines(decoded.lines, decoded.path)
        if conversations:
            yield from _encode_conversation(decoded, result, conversations[0])
            return
        yield from write_back(decoded, result, rebuild=_rebuilt_turn,
                              insert=lambda message, _: render_turns(message.data, Losses()))

    def unread(self, decoded: Decoded) -> list[tuple[str, int]]:
        """The turns of a speaker this codec does not know: kept in place here, carried by no other format."""
        conversations = _conversation_lines(decoded.lines, decoded.path)
        turns = conversations[0].data["conversations"] if conversations and conversations[0].data else \
            [line.data for line in decoded.lines if line.data is not None]
        unknown = sum(1 for turn in turns if isinstance(turn, dict) and turn.get("from") not in ROLE_OF)
        return [("ShareGPT turns of a speaker compact does not know (from)", unknown)]

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        for message in messages:
            written = render_turns(message.data, losses)
            if written:
                note_failed(message, losses)
            turns += written
        yield {"conversations": turns}


def _conversation_lines(lines: list[Line], path: str) -> list[Line]:
    """The conversation-per-line lines (at most one), or [] for a turn-per-line file."""
    found = [line for line in lines if line.data is not None and "conversations" in line.data]
    if not found:
        return []
    turn = next((line for line in lines if line.data is not None and "conversations" not in line.data), None)
    if turn is not None:
        raise line_error(path, turn, "this line is one ShareGPT turn but the file also holds whole conversations",
                         "a file holds one turn per line or one conversation per line, not both")
    if len(found) > 1:
        raise InputError(
            f"this file holds {len(found)} ShareGPT conversations, one per line; compact works on one conversation",
            path=path, line=found[1].number,
            fix="compact it as a dataset (`compact FILE`, `compact batch`): each conversation on its own budget",
        )
    return found


class _Reader:
    """Turns to canonical messages, pairing each observation with the oldest call still waiting."""

    def __init__(self, path: str, line: Line | None) -> None:
        self.path = path
        self.line = line
        self.waiting: list[tuple[str, str]] = []  # (call id, name), oldest first

    def conversation(self) -> list[Message]:
        line = self.line
        assert line is not None and line.data is not None
        turns = line.data["conversations"]
        messages: list[Message] = []
        system = line.data.get("system")
        if isinstance(system, str) and system:
            messages.append(origin_message({"role": "system", "content": system}, [line.number], sharegpt="system"))
        for index, turn in enumerate(turns):
            if not isinstance(turn, dict) or not isinstance(turn.get("from"), str) or "value" not in turn:
                raise line_error(self.path, line, f"turn {index + 1} is not a ShareGPT turn",
                                 'each turn is an object {"from": ..., "value": ...}')
            message = self.turn(turn, line, index)
            if message is not None:
                messages.append(message)
        return messages

    def turn(self, turn: dict[str, Any], line: Line, index: int | None) -> Message | None:
        role = ROLE_OF.get(turn.get("from"))  # type: ignore[arg-type]
        if role is None:
            return None  # an unknown speaker: kept as it is
        where = f"call_{line.number}" if index is None else f"call_{line.number}_{index + 1}"
        value = turn.get("value")
        if role == "call":
            data: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": self._calls(value, where, line, index)}
        elif role == "tool":
            call_id, name = self.waiting.pop(0) if self.waiting else (where, None)
            data = {"role": "tool", "tool_call_id": call_id}
            if name is not None:
                data["name"] = name
            data["content"] = _text(value)
        else:
            data = {"role": role, "content": _text(value)}
        return origin_message(data, [line.number], sharegpt=index)

    def _calls(self, value: Any, where: str, line: Line, index: int | None) -> list[dict[str, Any]]:
        try:
            parsed = jsonio.loads(value) if isinstance(value, str) else value
        except json.JSONDecodeError:
            parsed = None  # malformed, or nested past orjson's 1,024 levels: refused below
        items = parsed if isinstance(parsed, list) else [parsed]
        if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
            turn = "" if index is None else f"turn {index + 1}: "
            raise line_error(self.path, line, f"{turn}function_call value is not JSON {{\"name\", \"arguments\"}}",
                             'write the call as {"name": "...", "arguments": {...}}')
        calls = []
        for k, item in enumerate(items, start=1):
            call_id = where if len(items) == 1 else f"{where}_{k}"
            arguments = item.get("arguments", {})
            # Compact JSON, as every reader writes arguments: a clamped call is written back in that layout.
            text = arguments if isinstance(arguments, str) else jsonio.dumps(arguments).decode()
            calls.append({"id": call_id, "type": "function", "function": {"name": item["name"], "arguments": text}})
            self.waiting.append((call_id, item["name"]))
        return calls


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _encode_conversation(decoded: Decoded, result: Sequence[Message], conversation: Line) -> Iterator[dict[str, Any] | bytes]:
    originals = decoded.messages
    outcome: dict[int, Message] = {}
    for message in result:
        key = message.extra.get("key") if message.extra else None
        if key is not None and key < len(originals) and originals[key].extra.get("origin") == message.extra.get("origin"):
            outcome[key] = message
    untouched = len(result) == len(originals) and all(
        outcome.get(k) is not None and outcome[k].data == m.data for k, m in enumerate(originals))
    for line in decoded.lines:
        if line is not conversation or untouched:
            yield line.to_bytes()
        else:
            yield _conversation_out(line.data or {}, originals, result, outcome)


def _conversation_out(data: dict[str, Any], originals: list[Message], result: Sequence[Message],
                      outcome: dict[int, Message]) -> dict[str, Any]:
    turns = data["conversations"]
    owned = {m.extra.get("sharegpt") for m in originals}
    passing = [i for i in range(len(turns)) if i not in owned]  # turns with an unknown speaker, kept in place
    new_turns: list[Any] = []
    new = dict(data)
    system_kept = False
    for message in result:
        key = message.extra.get("key") if message.extra else None
        if key is not None and outcome.get(key) is message:
            index = originals[key].extra.get("sharegpt")
            if index == "system":
                system_kept = True
                new["system"] = _joined(message.data.get("content"))
                continue
            while passing and passing[0] < index:
                new_turns.append(turns[passing.pop(0)])
            same = message.data == originals[key].data
            new_turns.append(turns[index] if same else _turn_out(turns[index], message.data))
        else:
            new_turns.extend(render_turns(message.data, Losses()))
    new_turns.extend(turns[i] for i in passing)
    if not system_kept:
        new.pop("system", None)
    new["conversations"] = new_turns
    return new


def _rebuilt_turn(step: Rebuild) -> list[dict[str, Any]]:
    after = step.pieces[0][1]
    return [] if after is None else [_turn_out(step.line.data or {}, after.data)]


def _turn_out(turn: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    new = dict(turn)
    calls = data.get("tool_calls")
    if turn.get("from") == "function_call" and calls:
        new["value"] = _call_value(calls, turn.get("value"))
    elif turn.get("from") == "function_call":
        new["from"], new["value"] = "gpt", _joined(data.get("content"))  # its calls were dropped, its text stays
    else:
        new["value"] = _joined(data.get("content"))
    return new


def _call_value(calls: list[dict[str, Any]], before: Any = None) -> str:
    items = []
    for call in calls:
        function = call.get("function") or {}
        arguments = function.get("arguments", "{}")
        free_form = custom_arguments(call)
        try:
            parsed = free_form if free_form is not None else \
                jsonio.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError:
            parsed = arguments
        items.append({"name": function.get("name", ""), "arguments": parsed})
    with jsonio.deep_recursion():  # arguments may nest as deep as a line may (1,024 levels)
        value = json.dumps(items[0] if len(items) == 1 else items, ensure_ascii=False)
    try:
        if isinstance(before, str) and jsonio.loads(before) == jsonio.loads(value):
            return before  # the same calls: the value as it was written
    except json.JSONDecodeError:
        pass
    return value


def _joined(content: Any, losses: Losses | None = None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif losses is not None:
            kind = part.get("type") if isinstance(part, dict) else None
            losses.add(f"{kind or 'untyped'} content parts (ShareGPT turns are text)")
    return "\n\n".join(texts)


def render_turns(data: dict[str, Any], losses: Losses) -> list[dict[str, Any]]:
    """A canonical message as ShareGPT turns (an assistant with text and calls makes two)."""
    role = data.get("role")
    content = data.get("content")
    if role in FROM_OF:
        if role == "user" and data.get("name"):
            losses.add("user names")
        turns = []
        text = _joined(content, losses)
        if text or role != "assistant" or not data.get("tool_calls"):
            turns.append({"from": FROM_OF[role], "value": text})
        if role == "assistant" and data.get("tool_calls"):
            losses.add("tool call ids (ShareGPT pairs each observation with the call before it)", len(data["tool_calls"]))
            turns.append({"from": "function_call", "value": _call_value(data["tool_calls"])})
        if data.get("function_call"):
            losses.add("legacy function_call fields")
        return turns
    if role in ("tool", "function"):
        return [{"from": "observation", "value": _joined(content, losses)}]
    losses.add(f"{role} messages")
    return []


CODEC = ShareGPT()
