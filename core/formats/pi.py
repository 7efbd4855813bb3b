"""pi coding-agent sessions: a tree of entries, compacted along the branch the session resumes from.

The format, as pi itself defines it (badlogic/pi-mono, read for this module:
``packages/coding-agent/docs/session.md`` (session format v3),
``packages/coding-agent/src/core/session-manager.ts`` (``buildSessionContext``,
the leaf on load) and ``packages/coding-agent/src/core/messages.ts``
(``convertToLlm``)):

* line 1 is the header ``{"type": "session", "version": 3, "id", "timestamp", "cwd", ...}``;
  every other line is an entry ``{"type", "id", "parentId", "timestamp", ...}``
  and the entries form a tree by ``parentId``;
* ``message`` entries hold ``message: {role, content, ...}`` with roles ``user``
  (content a string or text/image blocks), ``assistant`` (``text``,
  ``thinking`` and ``toolCall {id, name, arguments: {...}}`` blocks),
  ``toolResult {toolCallId, toolName, content, details?, isError}``,
  ``bashExecution`` (a ``!`` command the user ran; sent as user text unless
  ``excludeFromContext``) and ``custom`` (an extension's message, sent as user text);
* ``compaction {summary, firstKeptEntryId, tokensBefore}``: pi sends its
  summary first, then the entries from ``firstKeptEntryId`` up to it, then the
  ones after it; the entries before ``firstKeptEntryId`` are not sent;
* ``custom_message {customType, content, display}`` (sent as user text),
  ``branch_summary {fromId, summary}`` (sent as user text), and entries that
  are not sent: ``model_change``, ``thinking_level_change``, ``custom``,
  ``label {targetId, label}``, ``session_info``.

What this reader does with it:

* the conversation is what pi would send: the path from the root to the leaf
  (pi's leaf on load is the last entry of the file), through the latest
  compaction on it. Entries of abandoned branches, entries a compaction hides
  and entries pi does not send stay in the file untouched;
* a ``compaction`` (or a message with role ``compactionSummary``) is a
  summary: a system message flagged ``extra["summary"]``; ``custom_message``
  entries of type ``compact`` (what compact writes) or ``system`` are system
  messages; other custom messages, ``branch_summary`` entries (the summary of
  another branch, which pi sends as user text) and ``bashExecution`` are user
  messages;
* image blocks are read as ``image_url`` parts (data URLs) and written back as
  pi images; text and thinking blocks are kept as they are.

Writing back: a removed entry leaves the file and its children (abandoned
branches, labels, ...) are re-linked to its nearest surviving ancestor (labels'
``targetId`` and ``fromId`` likewise); a compaction whose ``firstKeptEntryId``
went points at the next surviving entry it kept. A compaction is never taken
out of the file, because it also hides what it summarized: when compaction
removes its summary, the entry stays with ``[compact: summary removed]``. A
rewritten tool result loses ``details`` (tools keep a copy of their output, a
diff, there). Messages compact adds become ``custom_message`` entries of type
``compact`` linked into the path where they stand. A file without ids
(version 1) is read as one linear conversation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

from core.errors import InputError
from core.formats.base import (
    PARENT_RESULTS,
    Codec,
    Decoded,
    Drop,
    Insert,
    Keep,
    Line,
    Losses,
    Rebuild,
    line_error,
    origin_message,
    plan,
)
from core.formats.pi_tree import (
    EPOCH,
    IdMaker,
    Out,
    Tree,
    context,
    keep_leaf_last,
    link_past_invalid,
    relink,
    uuid_of,
)
from core.io import jsonio
from core.messages import FAILED, Message, arguments_value, is_summary

ENTRY_TYPES = frozenset({
    "message", "model_change", "thinking_level_change", "compaction", "branch_summary", "custom",
    "custom_message", "label", "session_info",
})
MESSAGE_ROLES = frozenset({"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary",
                           "compactionSummary"})
COMPACT_TYPE = "compact"  # customType of the custom_message entries compact writes
SYSTEM_TYPES = (COMPACT_TYPE, "system")
REMOVED_SUMMARY = "[compact: summary removed]"
# Parts of other formats pi has no block for (dropped on conversion, counted in the losses).
_FOREIGN = frozenset({"redacted_thinking", "reasoning", "refusal", "document", "image_url", "image", "input_image",
                      "tool_use", "tool_result", "file", "input_audio"})


class PiSession(Codec):
    name = "pi"
    title = "pi session"

    def accepts(self, data: dict[str, Any]) -> bool:
        kind = data.get("type")
        if not isinstance(kind, str) or "role" in data or "uuid" in data or "payload" in data:
            return False
        if kind == "session":
            return "id" in data
        if kind == "message":
            return isinstance(data.get("message"), dict)
        return kind in ENTRY_TYPES or ("id" in data and "parentId" in data)  # an entry type pi added later

    def evidence(self, data: dict[str, Any]) -> bool:
        kind = data.get("type")
        if kind == "session":
            return "cwd" in data or "version" in data
        if kind == "message":
            return data["message"].get("role") in MESSAGE_ROLES
        return kind in ENTRY_TYPES and kind != "custom"

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        for line in lines:
            _check_links(line, path)
        messages = []
        for line in context(Tree.of(lines)):
            message = _decode_entry(line, path)
            if message is not None:
                messages.append(message)
        return messages

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[dict[str, Any] | bytes]:
        tree = Tree.of(decoded.lines)
        out: list[Out] = []
        dropped: dict[str, Any] = {}
        for step in plan(decoded, result):
            if isinstance(step, Keep):
                if step.line.data is not None:  # a line that did not read is left out
                    out.append(Out(step.line, step.line.data))
            elif isinstance(step, Drop):
                data = step.line.data or {}
                if data.get("type") == "compaction":  # it also hides what it summarized: it stays
                    out.append(Out(step.line, {**data, "summary": REMOVED_SUMMARY}, changed=True))
                elif isinstance(data.get("id"), str):
                    dropped[data["id"]] = data.get("parentId")
            elif isinstance(step, Rebuild):
                before, after = step.pieces[0]
                assert after is not None  # one message per entry: all removed is a Drop
                out.append(Out(step.line, _rebuild_entry(step.line.data or {}, before, after), changed=True))
            elif isinstance(step, Insert):
                out.append(Out(None, _inserted_entry(step.message), changed=True, inserted=True))
        link_past_invalid(out, decoded.lines, tree)
        relink(out, dropped, tree)
        keep_leaf_last(out, dropped, tree)
        for item in out:
            if item.changed and item.data is not None:
                yield item.data
            elif item.line is not None:
                yield item.line.to_bytes()

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        ids = IdMaker(set())
        session = hashlib.sha256(b"".join(jsonio.dumps(m.data) for m in messages)).hexdigest()
        yield {"type": "session", "version": 3, "id": uuid_of(session), "timestamp": EPOCH, "cwd": ""}
        names: dict[str, str] = {}
        own = [ids.make(f"{n}") for n in range(len(messages))]
        entries: list[dict[str, Any] | None] = []
        compacted = False
        for position, message in enumerate(messages):
            if is_summary(message) and not compacted and all(m.role in ("system", "developer") for m in messages[:position]):
                compacted = True  # a summary before the conversation: pi's own way, a compaction entry
                entries.append({"type": "compaction", "summary": _text_of(message.data.get("content")),
                                "firstKeptEntryId": None, "tokensBefore": 0})
            else:
                entries.append(fresh_entry(message.data, losses, names, failed=bool(message.extra.get(FAILED))))
        parent = None
        for position, entry in enumerate(entries):
            if entry is None:
                continue
            if entry["type"] == "compaction":  # keeps what follows it: the next entry on
                entry["firstKeptEntryId"] = next(
                    (own[k] for k in range(position + 1, len(entries)) if entries[k] is not None), own[position])
            kind = entry.pop("type")
            yield {"type": kind, "id": own[position], "parentId": parent, "timestamp": EPOCH, **entry}
            parent = own[position]


# -- reading entries ------------------------------------------------------------------------


def _decode_entry(line: Line, path: str) -> Message | None:
    data = line.data or {}
    kind = data.get("type")
    if kind == "compaction":
        return _summary(line, data.get("summary"), "compaction", path)
    if kind == "branch_summary":  # pi sends it as user text: context from another branch, not a summary of this one
        summary = data.get("summary")
        return origin_message({"role": "user", "content": summary}, [line.number], pi=kind) if summary else None
    if kind == "custom_message":
        role = "system" if data.get("customType") in SYSTEM_TYPES else "user"
        return origin_message({"role": role, "content": _content_in(data.get("content"), line, path)},
                              [line.number], pi="custom_message")
    if kind != "message":
        return None
    message = data["message"]
    role = message.get("role")
    if role in ("user", "custom"):
        return origin_message({"role": "user", "content": _content_in(message.get("content"), line, path)},
                              [line.number], pi=role)
    if role == "assistant":
        return origin_message(_assistant_in(message, line, path), [line.number], pi=role)
    if role == "toolResult":
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str):
            raise line_error(path, line, "toolResult message without a toolCallId",
                             "a pi tool result names the call it answers in toolCallId")
        out: dict[str, Any] = {"role": "tool", "tool_call_id": call_id}
        if isinstance(message.get("toolName"), str):
            out["name"] = message["toolName"]
        out["content"] = _content_in(message.get("content"), line, path)
        failed = {FAILED: True} if message.get("isError") is True else {}
        return origin_message(out, [line.number], pi=role, **failed)
    if role == "bashExecution":
        if message.get("excludeFromContext"):
            return None  # a `!!` command: pi does not send it
        return origin_message({"role": "user", "content": bash_text(message)}, [line.number], pi=role)
    if role == "branchSummary" and message.get("summary"):
        return origin_message({"role": "user", "content": message["summary"]}, [line.number], pi=role)
    if role == "compactionSummary":
        return _summary(line, message.get("summary"), role, path)
    return None  # a role pi added later: kept as it is


def _summary(line: Line, text: Any, kind: str, path: str) -> Message:
    if not isinstance(text, str):
        raise line_error(path, line, f"{kind} without a summary text", "a pi summary holds its text in summary")
    return origin_message({"role": "system", "content": text}, [line.number], pi=kind, summary=True)


def _assistant_in(message: dict[str, Any], line: Line, path: str) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str) or content is None:
        return {"role": "assistant", "content": content or ""}
    if not isinstance(content, list):
        raise line_error(path, line, "assistant content is neither a list of blocks nor a string")
    parts: list[Any] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            if block.get("id") is None:
                raise line_error(path, line, "toolCall block without an id", "each pi toolCall carries its id")
            arguments = block.get("arguments", {})
            text = arguments if isinstance(arguments, str) else jsonio.dumps(arguments).decode()
            calls.append({"id": str(block["id"]), "type": "function",
                          "function": {"name": str(block.get("name", "")), "arguments": text}})
        else:
            parts.append(_part_in(block))
    out: dict[str, Any] = {"role": "assistant", "content": parts or (None if calls else "")}
    if calls:
        out["tool_calls"] = calls
    return out


def _content_in(content: Any, line: Line, path: str) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise line_error(path, line, "message content is neither a string nor a list of blocks")
    return [_part_in(block) for block in content]


def _part_in(block: Any) -> Any:
    if isinstance(block, dict) and block.get("type") == "image" and isinstance(block.get("data"), str):
        return {"type": "image_url", "image_url": {"url": f"data:{block.get('mimeType', 'image/png')};base64,{block['data']}"}}
    return block


def bash_text(message: dict[str, Any]) -> str:
    """What pi sends for a ``!`` command (messages.ts ``bashExecutionToText``)."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif message.get("exitCode") not in (None, 0):
        text += f"\n\nCommand exited with code {message['exitCode']}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


# -- writing entries ------------------------------------------------------------------------


def _rebuild_entry(entry: dict[str, Any], before: Message, after: Message) -> dict[str, Any]:
    kind = before.extra.get("pi")
    content = after.data.get("content")
    new = dict(entry)
    if kind in ("compaction", "branch_summary"):
        new["summary"] = _text_of(content)
    elif kind == "custom_message":
        new["content"] = _content_out(entry.get("content"), content)
    else:
        new["message"] = _rebuild_message(entry["message"], after.data)
    return new


def _rebuild_message(message: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    new = dict(message)
    role = message.get("role")
    content = data.get("content")
    if role in ("user", "custom"):
        new["content"] = _content_out(message.get("content"), content)
    elif role == "assistant":
        new["content"] = _blocks_out(message.get("content"), data)
    elif role == "toolResult":
        new["content"] = _content_out(message.get("content"), content, as_list=True)
        new.pop("details", None)  # the tool's own copy of the output goes with it
    elif role == "bashExecution":
        text = _text_of(content)
        prefix = f"Ran `{message.get('command', '')}`\n"
        body = text.removeprefix(prefix)
        new["output"] = body[4:-4] if body.startswith("```\n") and body.endswith("\n```") else body
        new["truncated"] = False
    else:  # branchSummary / compactionSummary messages
        new["summary"] = _text_of(content)
    return new


def _content_out(native: Any, content: Any, *, as_list: bool = False) -> Any:
    if isinstance(content, str) or content is None:
        if isinstance(native, str) and not as_list:
            return content or ""
        return [{"type": "text", "text": content}] if content else []
    originals = native if isinstance(native, list) else []
    return [_restore(part, originals) for part in content]


def _restore(part: Any, originals: list[Any]) -> Any:
    """The native block a canonical part came from (its extra fields kept), or the part written fresh."""
    for block in originals:
        if _part_in(block) == part:
            return block
    return _part_out(part)


def _part_out(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "image_url":
        url = str((part.get("image_url") or {}).get("url", ""))
        if url.startswith("data:") and ";base64," in url:
            mime, data = url[5:].split(";base64,", 1)
            return {"type": "image", "data": data, "mimeType": mime}
    return part


def _blocks_out(native: Any, data: dict[str, Any]) -> list[Any]:
    """An assistant's blocks: text and thinking in their places, toolCall blocks for the calls still there."""
    originals = native if isinstance(native, list) else []
    content = data.get("content")
    parts = list(content) if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])
    fresh = iter([_restore(p, originals) for p in parts])
    calls = {str(c.get("id")): c for c in data.get("tool_calls") or [] if isinstance(c, dict)}
    out: list[Any] = []
    for block in originals:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            call = calls.pop(str(block.get("id")), None)
            if call is not None:
                out.append(_call_out(call, block))
        else:
            part = next(fresh, None)
            if part is not None:
                out.append(part)
    out.extend(fresh)
    out.extend(_call_out(call, None) for call in calls.values())
    return out


def _call_out(call: dict[str, Any], block: dict[str, Any] | None) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments", "{}")
    new: dict[str, Any] = dict(block) if block is not None else {"type": "toolCall"}
    new["id"] = call.get("id")
    new["name"] = function.get("name", "")
    old = new.get("arguments")
    if block is not None and (old if isinstance(old, str) else jsonio.dumps(old).decode()) == arguments:
        return new  # the same arguments: the original object, key order and all
    value = arguments_value(call)
    new["arguments"] = value if isinstance(value, dict) else arguments  # pi wants an object: else as it was
    return new


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _inserted_entry(message: Message) -> dict[str, Any]:
    entry = fresh_entry(message.data, Losses(), {}) or {"type": "custom_message", "customType": COMPACT_TYPE,
                                                      "content": _text_of(message.data.get("content")), "display": True}
    if entry["type"] == "custom_message":
        entry.update(customType=COMPACT_TYPE, display=True)
    kind = entry.pop("type")
    return {"type": kind, "id": None, "parentId": None, "timestamp": EPOCH, **entry}


def fresh_entry(data: dict[str, Any], losses: Losses, names: dict[str, str], *,
                failed: bool = False) -> dict[str, Any] | None:
    """A canonical message as a pi entry (without id, parentId and timestamp); None when pi cannot hold it."""
    role = data.get("role")
    content = data.get("content")
    if role in ("system", "developer"):
        losses.add("system messages (pi keeps them as custom_message entries, sent as user text)")
        return {"type": "custom_message", "customType": "system", "content": _parts_out(content, losses, text_only=False),
                "display": False}
    if role == "user":
        return {"type": "message", "message": {"role": "user", "content": _parts_out(content, losses, text_only=False)}}
    if role == "assistant":
        blocks = _parts_out(content, losses, text_only=False, as_list=True)
        for call in data.get("tool_calls") or []:
            function = call.get("function") or {}
            names[str(call.get("id"))] = str(function.get("name", ""))
            block = {"type": "toolCall", "id": call.get("id"), "name": function.get("name", "")}
            block["arguments"] = _call_out(call, None)["arguments"]
            if not isinstance(block["arguments"], dict):
                losses.add("tool call arguments that are not a JSON object (pi wants an object)")
            blocks.append(block)
        if data.get("function_call"):
            losses.add("legacy function_call fields")
        return {"type": "message", "message": {"role": "assistant", "content": blocks,
                                               "stopReason": "toolUse" if data.get("tool_calls") else "stop"}}
    if role == "tool":
        call_id = data.get("tool_call_id")
        if call_id is None and isinstance(data.get("tool_call_ids"), list) and data["tool_call_ids"]:
            call_id = data["tool_call_ids"][0]
        if call_id is None:
            losses.add(PARENT_RESULTS)
            return None
        name = data.get("name") if isinstance(data.get("name"), str) else names.get(str(call_id), "")
        return {"type": "message", "message": {"role": "toolResult", "toolCallId": call_id, "toolName": name,
                                               "content": _parts_out(content, losses, text_only=True, as_list=True),
                                               "isError": failed}}
    losses.add(f"{role} messages")
    return None


def _parts_out(content: Any, losses: Losses, *, text_only: bool, as_list: bool = False) -> Any:
    if content is None or isinstance(content, str):
        if not as_list:
            return content or ""
        return [{"type": "text", "text": content}] if content else []
    kept: list[Any] = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" or kind in ("input_text", "output_text"):
            kept.append(part if kind == "text" else {"type": "text", "text": part.get("text", "")})
        elif kind == "thinking" and not text_only:
            block = {"type": "thinking", "thinking": part.get("thinking", "")}
            signature = part.get("thinkingSignature", part.get("signature"))
            if signature is not None:
                block["thinkingSignature"] = signature
            kept.append(block)
        elif kind == "image_url" and _part_out(part) is not part:
            kept.append(_part_out(part))
        elif kind == "image" and isinstance(part.get("source"), dict) and part["source"].get("type") == "base64":
            kept.append({"type": "image", "data": part["source"].get("data", ""),
                         "mimeType": part["source"].get("media_type", "image/png")})
        elif kind == "image" and isinstance(part.get("data"), str):
            kept.append(part)
        elif kind in _FOREIGN or not isinstance(part, dict) or text_only:
            losses.add(f"{kind or 'untyped'} content parts pi cannot hold")
        else:
            kept.append(part)  # a block type pi added later (read from a pi session): kept as it is
    return kept


CODEC = PiSession()


LINK_KEYS = ("id", "parentId", "targetId", "fromId", "firstKeptEntryId")


def _check_links(line: Line, path: str) -> None:
    """An entry's id and its links to other entries are strings (or null): the tree is built from them."""
    data = line.data
    if data is None or data.get("type") == "session":
        return
    for key in LINK_KEYS:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise InputError(f"the entry's {key} is {type(value).__name__}, not a string id", path=path,
                             line=line.number, fix=f"give {key} the id of another entry (a string) or null")
