"""OpenAI Responses API items, one per line; the item <-> canonical conversion Codex reuses.

How items become canonical messages:

* A ``message`` item of role user, system or developer is one message; its
  ``input_text`` parts become ``text`` parts (a single text part reads as a
  plain string). Lines without ``type`` but with a role and Responses-shaped
  content are the API's short form (``EasyInputMessage``) and read the same:
  a Responses input list often mixes them in. They are never evidence of
  this format, so a file of only such lines is still read as OpenAI chat.
* The assistant side of one model response is one canonical assistant
  message: the ``reasoning`` items (which come first), the assistant
  ``message`` item and the consecutive calls after it (parallel calls).
  Reasoning items and hosted tool calls (``web_search_call`` and other
  ``*_call`` items without a ``call_id``: their result is inside them) are
  kept verbatim as content parts, encrypted content included. A second
  reasoning or assistant message item after a message or a call starts the
  next assistant message.
* Calls with a ``call_id`` (``function_call``, ``custom_tool_call``,
  ``local_shell_call``, ``computer_call``...) are ``tool_calls`` whose id is
  the ``call_id``; each ``*_call_output`` is a ``tool`` message answering it.
  Pairing, orphan warnings and ``--repair`` therefore speak of call_ids.
* Any other item type passes through in place, untouched and never removed.
* A ``compaction`` item (what ``/responses/compact`` or ``context_management``
  compaction returns: opaque ``encrypted_content``) is a summary, pinned, never
  edited or moved, counted as 0 tokens (its content is unreadable). The server
  needs nothing before the newest one: those items are kept in place as they
  are and not read (not counted, not compacted).

Writing back, each line is kept byte for byte unless its message changed;
a changed item keeps every field it had and only its content, output or
call changes. A message compact adds becomes a ``message`` item of role
``system`` (read back as a system message, so a rerun recognises its own
summaries).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from core.formats.base import (
    EMPTY_LEFT_OUT,
    PARENT_RESULTS,
    Codec,
    Decoded,
    Item,
    Line,
    Losses,
    Rebuild,
    line_error,
    note_failed,
    origin_message,
    says_nothing,
    unread_before,
    write_back,
)
from core.formats.responses_items import (
    BLANK_SCREENSHOT,
    CALL,
    COMPACTION,
    MESSAGE,
    MESSAGE_ROLES,
    NOT_CARRIED,
    OTHER,
    OUTPUT,
    REASONING,
    TEXT_PARTS,
    accepts_item,
    as_parts,
    canonical_call,
    canonical_content,
    canonical_parts,
    is_item_part,
    item_kind,
    knows_item,
    native_content,
    shows_item,
    with_call,
)
from core.io import jsonio
from core.messages import CALL_LINES, CUSTOM_CALL, PROVIDER_RECORD, Message, result_ids, tool_calls

COMPACTION_RECORD = "OpenAI compaction item"  # extra[PROVIDER_RECORD] of the summary it makes

# --- reading -----------------------------------------------------------------------------------

def is_compaction_item(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == COMPACTION and isinstance(item.get("encrypted_content"), str)


def newest_compaction_item(lines: Sequence[Line]) -> int:
    """The index in ``lines`` of the newest compaction item (0 when none): the server needs nothing before it."""
    for at in range(len(lines) - 1, -1, -1):
        if is_compaction_item(lines[at].data):
            return at
    return 0


class ItemReader:
    """Turns Responses items, in file order, into canonical messages.

    ``harness`` says whether user-role text is the agent's own (Codex's
    AGENTS.md and ``<environment_context>`` messages): such a message reads as
    a system message, so it neither starts a turn nor is pinned as the last
    user message.
    """

    def __init__(self, path: str, harness: Any = None) -> None:
        self.path = path
        self.harness = harness
        self.messages: list[Message] = []
        self._group: dict[str, Any] | None = None

    def add(self, line: Line, item: Any) -> None:
        if not isinstance(item, dict):
            raise line_error(self.path, line, "this Responses item is not a JSON object")
        kind = item_kind(item)
        if is_compaction_item(item):
            self.flush()  # an earlier compaction's summary: opaque, but a summary (never summarised again)
            self.messages.append(origin_message({"role": "system", "content": [item]}, [line.number], summary=True,
                                                layout=((line.number, COMPACTION),),
                                                **{PROVIDER_RECORD: COMPACTION_RECORD}))
            return
        if kind == OTHER:
            return  # passes through in place
        if kind == MESSAGE:
            role, content = item.get("role"), item.get("content")
            if role not in MESSAGE_ROLES:
                raise line_error(self.path, line, f"a message item needs a role ({', '.join(MESSAGE_ROLES)}), not {role!r}")
            if not isinstance(content, (str, list)):
                raise line_error(self.path, line, "a message item's content must be a string or a list of parts")
            if role == "assistant":
                self._assistant(line, item, MESSAGE)
                return
            self.flush()
            parts = canonical_parts(content)
            if self.harness is not None and role == "user" and self.harness(parts):
                role = "system"
            self._emit({"role": role, "content": canonical_content(parts)}, line, ((line.number, "text"),))
        elif kind == OUTPUT:
            call_id = item.get("call_id")
            if call_id is None and item.get("type") == "local_shell_call_output":
                call_id = item.get("id")  # the API names the call's call_id `id` on this one
            if not isinstance(call_id, str):
                raise line_error(self.path, line, f"a {item['type']} item needs the call_id of its call",
                                 fix="add call_id, or --skip-invalid to leave the line out")
            self.flush()
            content = item.get("output")
            data = {"role": "tool", "tool_call_id": call_id,
                    "content": content if isinstance(content, str) else canonical_content(canonical_parts(content)) or ""}
            self._emit(data, line, ((line.number, "output"),))
        else:
            if kind == CALL and not isinstance(item.get("call_id"), str):
                raise line_error(self.path, line, f"a {item['type']} item's call_id must be a string")
            self._assistant(line, item, kind)

    def _assistant(self, line: Line, item: dict[str, Any], kind: str) -> None:
        group = self._group
        if group is not None and kind in (REASONING, MESSAGE) and (group["message"] or group["calls"]):
            self.flush()
            group = None
        if group is None:
            group = self._group = {"lines": [], "parts": [], "calls": [], "layout": [], "message": False}
        group["lines"].append(line.number)
        parts = group["parts"]
        if kind == MESSAGE:
            start = len(parts)
            parts.extend(canonical_parts(item["content"]))
            group["layout"].append((line.number, "message", start, len(parts)))
            group["message"] = True
        elif kind == CALL:
            group["calls"].append(canonical_call(item))
            group["layout"].append((line.number, "call", item["call_id"]))
        else:  # reasoning, hosted call: the item itself is the part
            group["layout"].append((line.number, "part", len(parts)))
            parts.append(item)

    def flush(self) -> None:
        group, self._group = self._group, None
        if group is None:
            return
        data: dict[str, Any] = {"role": "assistant", "content": canonical_content(group["parts"])}
        if group["calls"]:
            data["tool_calls"] = group["calls"]
        calls = {entry[2]: entry[0] for entry in group["layout"] if entry[1] == "call"}
        self.messages.append(origin_message(data, group["lines"], layout=tuple(group["layout"]),
                                            **({CALL_LINES: calls} if calls else {})))

    def _emit(self, data: dict[str, Any], line: Line, layout: tuple[Any, ...]) -> None:
        self.messages.append(origin_message(data, [line.number], layout=layout))

    def finish(self) -> list[Message]:
        self.flush()
        return self.messages


# --- writing back --------------------------------------------------------------------------------

def rebuilt_items(number_: int, item: dict[str, Any], before: Message, after: Message | None) -> list[dict[str, Any]] | None:
    """What the item on line ``number_`` becomes: None when it is unchanged (keep its bytes), [] when it goes."""
    if after is None:
        return []
    slot = next((s for s in before.extra.get("layout", ()) if s[0] == number_), None)
    if slot is None:
        return None
    kind = slot[1]
    if kind == COMPACTION:
        if after.data.get("content") == before.data.get("content"):
            return None
        return render_items(after.data, Losses())  # folded into a new summary: written as that summary
    if kind == "text":
        content = native_content(after.data.get("content"), item.get("content"), "input_text")
        return None if content == item.get("content") else [{**item, "content": content}]
    if kind == "output":
        output = native_content(after.data.get("content"), item.get("output"), "output")
        if output == item.get("output"):
            return None
        if item.get("type") == "computer_call_output" and not isinstance(output, dict):
            output = BLANK_SCREENSHOT  # the API takes only a screenshot here: a blank one stands for the cleared one
        return [{**item, "output": output}]
    if kind == "call":
        call = next((c for c in tool_calls(after.data) if str(c.get("id")) == slot[2]), None)
        if call is None:
            return []
        return None if call == canonical_call(item) else [with_call(item, dict(call))]
    shares, loose = _content_shares(before, after)
    if loose and number_ == before.extra["layout"][0][0]:
        extra = [{"type": "message", "role": "assistant", "content": native_content(loose, None, "output_text")}]
    else:
        extra = []
    share = shares.get(number_)
    if kind == "part":
        if share is None:
            return extra
        return extra + [share] if extra or share != item else None
    if not share:
        return extra
    content = native_content(canonical_content(share), item.get("content"), "output_text")
    if content == item.get("content"):
        return extra + [item] if extra else None
    return extra + [{**item, "content": content}]


def _content_shares(before: Message, after: Message) -> tuple[dict[int, Any], list[Any]]:
    """Each item's share of the rewritten content, and text left with no message item to carry it."""
    layout = before.extra["layout"]
    old, new = as_parts(before.data.get("content")), as_parts(after.data.get("content"))
    shares: dict[int, Any] = {}
    if len(old) == len(new) and all(is_item_part(a) == is_item_part(b) for a, b in zip(old, new)):
        for slot in layout:
            if slot[1] == "part":
                shares[slot[0]] = new[slot[2]]
            elif slot[1] == "message":
                shares[slot[0]] = new[slot[2]:slot[3]]
        return shares, []
    loose = [p for p in new if not is_item_part(p)]
    for slot in layout:
        if slot[1] == "part":
            shares[slot[0]] = old[slot[2]] if old[slot[2]] in new else None
        elif slot[1] == "message":
            shares[slot[0]], loose = loose, []
    return shares, loose


def custom_call_ids(messages: Sequence[Message]) -> frozenset[str]:
    """The ids of the custom (free-form) calls: written fresh, their outputs are custom outputs too."""
    return frozenset(str(call.get("id")) for message in messages for call in tool_calls(message.data)
                     if call.get("type") == CUSTOM_CALL)


def render_items(data: dict[str, Any], losses: Losses, custom: frozenset[str] = frozenset(),
                 ) -> list[dict[str, Any]]:
    """A canonical message written fresh as Responses items (``custom``: the ids of the custom calls,
    whose outputs are ``custom_tool_call_output`` items)."""
    role = data.get("role")
    content = data.get("content")
    if role == "tool":
        call_ids = result_ids(data)  # SWE-agent's tool_call_ids list too: every call it answers gets the output
        if not call_ids:
            losses.add(PARENT_RESULTS)
            return []
        output = content if isinstance(content, str) else native_content(content, None, "output", losses)
        return [{"type": "custom_tool_call_output" if call_id in custom else "function_call_output",
                 "call_id": call_id, "output": output} for call_id in call_ids]
    if role == "function":
        losses.add("legacy function results (no call id)")
        return []
    if role != "assistant":
        return _input_items(role if role in MESSAGE_ROLES else "user", content, losses)
    items: list[dict[str, Any]] = []
    text: list[Any] = []
    for part in as_parts(content):
        if is_item_part(part):
            items.append(_sendable_item(part))
        else:
            text.append(part)
    said = _assistant_text(text, losses)
    if said:
        # The short input form: an output message (output_text parts) is valid input only with the
        # id and status the API gave it, which a transcript rewritten by compact does not have.
        items.append({"type": "message", "role": "assistant", "content": said})
    for call in tool_calls(data):
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        arguments = function.get("arguments", "")
        arguments = arguments if isinstance(arguments, str) else jsonio.dumps(arguments).decode()
        call_id, name = str(call.get("id")), str(function.get("name", ""))
        if call.get("type") == CUSTOM_CALL:
            items.append({"type": "custom_tool_call", "call_id": call_id, "name": name, "input": arguments})
        else:
            items.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments})
    if isinstance(data.get("function_call"), dict):
        losses.add("legacy function calls (no call id)")
    if not items and says_nothing(data):
        losses.add(EMPTY_LEFT_OUT)
    return items


def _input_items(role: str, content: Any, losses: Losses) -> list[dict[str, Any]]:
    """A message of ``role`` as input items: its compaction items carried as they are, in their place
    among its text (a Codex replacement history: the user messages, then the item)."""
    parts = as_parts(content)
    if not any(is_compaction_item(p) for p in parts):
        return [{"type": "message", "role": role, "content": native_content(content, None, "input_text", losses)}]
    items: list[dict[str, Any]] = []
    run: list[Any] = []
    for part in [*parts, None]:
        if part is not None and not is_compaction_item(part):
            run.append(part)
            continue
        if run:
            items.append({"type": "message", "role": role, "content": native_content(run, None, "input_text", losses)})
            run = []
        if part is not None:
            items.append(part)
    return items


def _assistant_text(parts: list[Any], losses: Losses) -> str:
    """An assistant's text (refusals included) as one string; parts that are not text are counted as losses."""
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str) and part.get("type") in ("text", *TEXT_PARTS):
            texts.append(part["text"])
        elif isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            losses.add("refusals (written as assistant text: the input form has no refusal part)")
            texts.append(part["refusal"])
        else:
            kind = part.get("type") if isinstance(part, dict) else None
            losses.add(NOT_CARRIED.get(str(kind), f"{kind or 'untyped'} parts of assistant messages, left out"))
    return "\n\n".join(t for t in texts if t)


def _sendable_item(item: dict[str, Any]) -> dict[str, Any]:
    """An item kept verbatim, less the null fields the API refuses (a reasoning item's ``content: null``)."""
    return {k: v for k, v in item.items() if v is not None or k == "encrypted_content"}


class Responses(Codec):
    name = "responses"
    title = "OpenAI Responses items"

    def accepts(self, data: dict[str, Any]) -> bool:
        return accepts_item(data)

    def evidence(self, data: dict[str, Any]) -> bool:
        return shows_item(data)

    def knows(self, data: dict[str, Any]) -> bool:
        return knows_item(data)

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        reader = ItemReader(path)
        for line in lines[newest_compaction_item(lines):]:
            if line.data is not None:
                reader.add(line, line.data)
        return reader.finish()

    def unread(self, decoded: Decoded) -> list[tuple[str, int]]:
        return unread_before(super().unread(decoded), decoded,
                             "items before the newest compaction item (the server no longer needs them)")

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[Item]:
        return write_back(decoded, result, rebuild=_rebuilt_line,
                          insert=lambda message, _: render_items(message.data, Losses()))

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        custom = custom_call_ids(messages)
        for message in messages:
            items = render_items(message.data, losses, custom)
            if items:  # (a result left out is counted as such, not as a flag lost)
                note_failed(message, losses)
            yield from items


def _rebuilt_line(step: Rebuild) -> Iterator[dict[str, Any] | bytes]:
    assert step.line.data is not None
    for before, after in step.pieces:
        items = rebuilt_items(step.line.number, step.line.data, before, after)
        yield from [step.line.to_bytes()] if items is None else items


CODEC = Responses()
