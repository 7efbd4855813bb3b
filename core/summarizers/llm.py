"""A summarizer backed by any OpenAI-compatible chat-completions server.

One request per span; if the reply misses the `## Preserved Kinds:` trailer,
a required kind, or an identifier that must survive, it is asked once more
with a stricter prompt naming what is missing (quality retry).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from core.counting.counter import MessageCounter
from core.summarizers.base import SummaryRequest, SummaryResult, preserved_kinds
from core.summarizers.chat_client import ChatClient, SummarizerError
from core.summarizers.facts import missing_facts
from core.summarizers.prompt import DEFAULT_PROMPT, chat_messages

# A reply the server ended at max_tokens (finish_reason "length") stops mid-sentence.
CUT_OFF = "it was cut off at the length limit: write a shorter summary, so that it ends with the trailer"
CUT_OFF_MARK = "[compact: the summary was cut off here, at the summarizer's length limit]"


@dataclass(frozen=True)
class LLMSummarizer:
    client: ChatClient
    prompt: str = DEFAULT_PROMPT
    quality_retry: bool = True
    require_preserved_kinds: Sequence[str] = ("decision", "rationale")
    name: str = field(default="openai")
    fits_its_room: ClassVar[bool] = False  # (asking again would cost a second call: the first summary stands)

    def identity(self) -> str:
        # Everything that shapes the reply: a changed setting must not be answered from the cache.
        settings = f"{self.prompt}\0{self.quality_retry}\0{','.join(self.require_preserved_kinds)}"
        settings_hash = hashlib.sha256(settings.encode()).hexdigest()[:16]
        return f"openai:{self.client.model}:{settings_hash}"

    def _problems(self, text: str, finish: str | None, request: SummaryRequest, counter: MessageCounter) -> list[str]:
        found = self.problems(text, request, counter)
        return [CUT_OFF, *found] if finish == "length" else found

    def problems(self, text: str, request: SummaryRequest, counter: MessageCounter | None = None) -> list[str]:
        found: list[str] = []
        if counter is not None and counter.count_text(text) > request.max_tokens:
            found.append(f"keep the whole summary under {request.max_tokens} tokens")
        kinds = preserved_kinds(text)
        if kinds is None:
            found.append("end with the line `## Preserved Kinds: ...`")
        else:
            absent = [k for k in self.require_preserved_kinds if k not in kinds]
            if absent:
                found.append(f"preserve and list these kinds: {', '.join(absent)}")
        lost = missing_facts(text, request.facts)
        if lost:
            found.append("keep these exactly as written: " + "; ".join(lost))
        if "<summary" not in text:
            found.append('wrap each topic in <summary topic="..." compressed-from-turns="...">...</summary>')
        return found

    def summarize(self, request: SummaryRequest, counter: MessageCounter) -> SummaryResult:
        # The server is asked for at most the summary's budget; a longer reply is retried, then cut.
        client = dataclasses.replace(self.client, max_tokens=request.max_tokens)
        text, finish = client.reply(chat_messages(self.prompt, request))
        text = text.strip()
        if not text:
            raise SummarizerError("the summarizer answered with an empty summary")
        attempts = 1
        problems = self._problems(text, finish, request, counter)
        if problems and self.quality_retry:
            retried, retried_finish = client.reply(chat_messages(self.prompt, request, problems))
            retried = retried.strip()
            attempts = 2
            if retried and len(self._problems(retried, retried_finish, request, counter)) <= len(problems):
                text, finish = retried, retried_finish
            problems = self._problems(text, finish, request, counter)
        if counter.count_text(text) > request.max_tokens:
            from core.engine.clamp import clamp_text

            text = clamp_text(text, request.max_tokens, counter) or text
        if finish == "length":  # kept (it says what it says), never passed off as whole
            text = f"{text}\n{CUT_OFF_MARK}"
        return SummaryResult(
            text=text,
            by=f"openai:{self.client.model}",
            attempts=attempts,
            preserved_kinds=preserved_kinds(text) or [],
            notes=[p for p in problems if not p.startswith("keep these exactly")],
        )
