"""The closing steps a config turns off or reorders, and what `compact config show` says of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.config import MemoryConfig, load_config
from core.errors import ConfigError
from tests.helpers import invoke, invoke_with_report

RUST_PORT = "claude-code/claude-reliability-python-to-rust-port.jsonl"


def _given_back(report: dict) -> set[int]:
    """The lines give_back's detail names ("gave back rewritten messages (line(s) 12-14, 49)...")."""
    detail = next(a["detail"] for a in report["actions"] if a["strategy"] == "give_back")
    lines: set[int] = set()
    for span in re.search(r"line\(s\) ([\d, -]+)\)", detail).group(1).split(", "):  # type: ignore[union-attr]
        low, _, high = span.partition("-")
        lines |= set(range(int(low), int(high or low) + 1))
    return lines


def _cleared(report: dict) -> set[int]:
    return {e["line"] for e in report["removed"] if e["strategy"] == "clear_tool_results" and e["action"] == "rewritten"}


def test_a_run_with_give_back_turned_off_keeps_its_rewrites(realdata: Path, tmp_path: Path) -> None:
    """At 8,000 tokens give_back puts cleared results back on the Rust-port session; a config without
    it leaves them cleared, and the run still lands under the budget."""
    source = str(realdata / RUST_PORT)
    _, default = invoke_with_report(source, "--max-tokens", "8000", "-o", str(tmp_path / "a.jsonl"), tmp_path=tmp_path)
    given = [a for a in default["actions"] if a["strategy"] == "give_back"]
    assert given and given[0]["messages_changed"] >= 1
    config = tmp_path / "c.toml"
    config.write_text('closing_steps = ["clamp_pinned", "turn_boundary", "thinking_after_change"]\n')
    _, without = invoke_with_report(source, "--max-tokens", "8000", "--config", str(config),
                                    "-o", str(tmp_path / "b.jsonl"), tmp_path=tmp_path)
    assert not [a for a in without["actions"] if a["strategy"] == "give_back"]
    given_back = _given_back(default)
    assert given_back and given_back <= _cleared(without) and not given_back <= _cleared(default)
    assert without["after"]["tokens"] < default["after"]["tokens"] <= 8000


def test_an_unknown_closing_step_is_a_config_error_naming_the_nearest(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('closing_steps = ["turn_boundary", "give_bak"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(str(config))
    assert "give_bak" in caught.value.what and "did you mean 'give_back'" in (caught.value.fix or "")


def test_repair_is_asked_for_with_its_flag_not_listed_as_a_closing_step() -> None:
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(closing_steps=("repair",))
    assert "--repair" in (caught.value.fix or "")


def test_config_show_lists_the_closing_steps_in_force(tmp_path: Path) -> None:
    shown = json.loads(invoke("config", "show").stdout)
    assert shown["closing_steps"] == ["clamp_pinned", "turn_boundary", "thinking_after_change", "give_back"]
    assert json.loads(invoke("config", "show", "--preset", "seed").stdout)["closing_steps"] == []
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"closing_steps": ["give_back", "turn_boundary"]}))
    shown = json.loads(invoke("config", "show", "--config", str(config)).stdout)
    assert shown["closing_steps"] == ["give_back", "turn_boundary"]
