"""Every field of every message survives a rewrite exactly (Hypothesis).

Transcripts are generated with extra fields holding what orjson cannot carry on
its own: integers past 64 bits, nesting past its 254 levels, lone surrogates, and
any unicode. They are written to a real file with the standard library, compacted
with strategies that rewrite every message they can, and the output is parsed
back with the standard library (which keeps integers exact). Each output message
that came from an input message must hold every field the input had, equal in
value and in type (1 is not 1.0), its content aside when a strategy rewrote it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.api import compact_file
from core.config import MemoryConfig, StrategySpec
from core.engine.pipeline import FULL

BIG_INTS = st.one_of(st.integers(), st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1),
                     st.integers(min_value=10**30, max_value=10**60))
SCALARS = st.one_of(st.none(), st.booleans(), BIG_INTS, st.floats(allow_nan=False, allow_infinity=False),
                    st.text(), st.sampled_from(["\ud800", "a\udfffb", "\ud83d", "😀", "\u2028", "\x00\x1f"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                      max_leaves=12)


@st.composite
def deep(draw: Any) -> Any:
    """A value nested past orjson's 254 writable levels (and below its 1,024 readable)."""
    value: Any = draw(SCALARS)
    for _ in range(draw(st.integers(250, 400))):
        value = [value] if draw(st.booleans()) else {"k": value}
    return value


EXTRA = st.dictionaries(st.sampled_from(["meta", "n", "ts", "usage", "x_custom"]), st.one_of(VALUES, deep()),
                        max_size=3)
TEXT = st.lists(st.sampled_from(["alpha", "beta", "x = 1", "path/a.py", "😀", "naïve"]), min_size=40,
                max_size=80).map(" ".join)


@st.composite
def transcripts(draw: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief", **draw(EXTRA)}]
    call = 0
    for _ in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": draw(TEXT), **draw(EXTRA)})
        for _ in range(draw(st.integers(0, 2))):
            call += 1
            messages.append({"role": "assistant", "content": None, **draw(EXTRA), "tool_calls": [
                {"id": f"c{call}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]})
            messages.append({"role": "tool", "tool_call_id": f"c{call}", "content": draw(TEXT), **draw(EXTRA)})
        messages.append({"role": "assistant", "content": draw(TEXT), **draw(EXTRA)})
    for number, message in enumerate(messages):
        message["uid"] = number
    return messages


def same(left: Any, right: Any) -> bool:
    """Equal in value and in type, all the way down (json.loads gives int for 1 and float for 1.0)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


STRATEGIES = (StrategySpec.parse("clamp_oversized_messages:max_part_tokens=16"),
              StrategySpec.parse("clear_tool_results:keep_pairs=0"))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(transcripts(), st.booleans())
def test_every_field_survives_a_rewrite_exactly(messages: list[dict[str, Any]], ascii_only: bool) -> None:
    lines = [json.dumps(m, ensure_ascii=ascii_only) for m in messages]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        # Lone surrogates can only be written \u-escaped: json.dumps does that with ensure_ascii,
        # and here even without it (they cannot be encoded as UTF-8 otherwise).
        path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8", "backslashreplace"))
        config = MemoryConfig(strategies=STRATEGIES)
        result = compact_file(str(path), config, mode=FULL, use_cache=False)
        output = b"".join(bytes(chunk) for chunk in result.chunks())
    rewritten = 0
    by_uid = {m["uid"]: m for m in messages}
    for line in output.split(b"\n"):  # not splitlines(): U+2028 inside a string is no line end
        if not line:
            continue
        out = json.loads(line)
        original = by_uid.get(out.get("uid"))
        if original is None:
            continue  # a message compact added
        changed = out.get("content") != original.get("content")
        rewritten += changed
        for field, value in original.items():
            if field == "content" and changed:
                continue
            assert field in out, field
            assert same(out[field], value), (field, out[field], value)
    assert rewritten > 0  # the strategies did rewrite messages: the property is not vacuous
