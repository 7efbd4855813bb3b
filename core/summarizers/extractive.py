"""An offline, deterministic summarizer: a bounded digest of the turns.

Per turn: what the user asked, the tool calls with their key arguments, the
errors met and what the assistant said (its decisions). Never longer than its
token budget: lines are added oldest first until the budget is reached, and
the digest says how many were left out. A previous summary is carried over
segment by segment, its oldest segments giving way first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.counting import MessageCounter
from core.messages import call_arguments, call_name, content_text, is_user_message, tool_calls
from core.summarizers.base import TRAILER, SummaryRequest, SummaryResult
from core.summarizers.facts import first_error_line

ASK_CHARS = 300
SAY_CHARS = 240
ARG_CHARS = 80
_SEGMENT = re.compile(r"<summary\b.*?</summary>", re.S)


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _call_line(call: Mapping[str, Any]) -> str:
    arguments = call_arguments(call)
    shown = ", ".join(f"{k}={_one_line(str(v), ARG_CHARS)}" for k, v in list(arguments.items())[:3])
    return f"- called {call_name(call)}({shown})"


def _turns(messages: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    turns: list[list[Mapping[str, Any]]] = []
    for message in messages:
        if is_user_message(message) or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def _turn_lines(turn: Sequence[Mapping[str, Any]], kinds: set[str]) -> tuple[str, list[str]]:
    topic = ""
    lines: list[str] = []
    for message in turn:
        role = message.get("role")
        text = content_text(message)
        if role == "user" and text.strip():
            topic = topic or _one_line(text, 60)
            lines.append(f"- user asked: {_one_line(text, ASK_CHARS)}")
        elif role == "assistant":
            if text.strip():
                lines.append(f"- assistant: {_one_line(text, SAY_CHARS)}")
                kinds.add("decision")
                if re.search(r"\bbecause\b|\bso that\b|\bsince\b", text, re.I):
                    kinds.add("rationale")
                if re.search(r"\bnext\b|\bwill\b|\bthen\b", text, re.I):
                    kinds.add("next_step")
            for call in tool_calls(message):
                lines.append(_call_line(call))
                kinds.add("technical_detail")
        elif role in ("tool", "function"):
            error = first_error_line(text)
            if error:
                lines.append(f"- error: {_one_line(error, SAY_CHARS)}")
                kinds.add("error")
        elif role in ("system", "developer") and text.strip():
            lines.append(f"- note: {_one_line(text, SAY_CHARS)}")
    return topic or "earlier work", lines


@dataclass(frozen=True)
class ExtractiveSummarizer:
    name: str = "extractive"

    def identity(self) -> str:
        return "extractive/1"

    def summarize(self, request: SummaryRequest, counter: MessageCounter) -> SummaryResult:
        kinds: set[str] = set()
        segments = []
        for offset, turn in enumerate(_turns(request.messages)):
            number = request.first_turn + offset
            topic, lines = _turn_lines(turn, kinds)
            topic = topic.replace('"', "'")
            segments.append((f'<summary topic="{topic}" compressed-from-turns="{number}-{number}">', lines))
        previous = _SEGMENT.findall(request.previous or "")
        text = self._fit(previous, segments, sorted(kinds), request.max_tokens, counter)
        return SummaryResult(text=text, by=self.name, preserved_kinds=sorted(kinds))

    def _fit(
        self,
        previous: list[str],
        segments: list[tuple[str, list[str]]],
        kinds: list[str],
        budget: int,
        counter: MessageCounter,
    ) -> str:
        """Newest material first: older turns, then earlier summaries, give way to stay within ``budget``."""
        trailer = f"{TRAILER} {', '.join(kinds) if kinds else 'technical_detail'}"
        note_reserve = 24
        used = counter.count_text(trailer) + note_reserve
        kept: list[str] = []
        omitted = 0
        full = False
        for head, lines in reversed(segments):
            frame = counter.count_text(head) + counter.count_text("</summary>") + 2
            if full or used + frame > budget:
                full = True  # no gaps: once a turn does not fit, the older ones go too
                omitted += len(lines)
                continue
            used += frame
            body = []
            for line in lines:
                cost = counter.count_text(line) + 1
                if used + cost > budget:
                    omitted += 1
                    continue
                body.append(line)
                used += cost
            kept.insert(0, "\n".join([head, *body, "</summary>"]))
        carried: list[str] = []
        for segment in reversed(previous):
            cost = counter.count_text(segment) + 1
            if full or used + cost > budget:
                full = True
                omitted += max(1, segment.count("\n- "))
                continue
            carried.insert(0, segment)
            used += cost
        parts = [*carried, *kept]
        if omitted:
            parts.append(f"({omitted} older line(s) left out to stay within {budget} tokens)")
        parts.append(trailer)
        return "\n".join(parts)
