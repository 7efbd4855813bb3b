"""Configuration files, flags over files, and `compact config show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import strategies
from core.config import MemoryConfig, StrategySpec, load_config
from core.errors import ConfigError
from core.io.schema_loader import load_schema
from tests.helpers import invoke

TOML = """
max_messages = 50
context_window_tokens = 32000
warn_fraction = 0.5
offload_turns = 3
keep = ["tool:read_file", "match:TODO"]

[markers]
warning = "NOTE:"

[[strategies]]
kind = "ClearToolResults"
keep_pairs = 5

[[strategies]]
kind = "sliding_window"
keep_messages = 10
"""


def test_toml_and_json_give_the_same_config(tmp_path: Path) -> None:
    toml_path = tmp_path / "c.toml"
    toml_path.write_text(TOML)
    import tomllib

    json_path = tmp_path / "c.json"
    json_path.write_text(json.dumps(tomllib.loads(TOML)))
    from_toml, from_json = load_config(str(toml_path)), load_config(str(json_path))
    assert from_toml == from_json
    assert from_toml.strategies == (StrategySpec("clear_tool_results", {"keep_pairs": 5}),
                                    StrategySpec("sliding_window", {"keep_messages": 10}))
    assert from_toml.warning_marker == "NOTE:" and from_toml.keep == ("tool:read_file", "match:TODO")


def test_setting_max_tokens_in_a_file_clears_the_default_fraction(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("max_tokens = 9000\n")
    config = load_config(str(path))
    assert (config.max_tokens, config.max_fraction) == (9000, None)


def test_both_token_triggers_are_refused() -> None:
    with pytest.raises(ConfigError, match="mutually exclusive"):
        MemoryConfig(max_tokens=10, max_fraction=0.5)


def test_flags_override_the_file_and_a_token_flag_clears_the_other(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("max_tokens = 9000\nwarn_fraction = 0.3\n")
    config = load_config(str(path)).with_overrides(max_fraction=0.5)
    assert (config.max_tokens, config.max_fraction, config.warn_fraction) == (None, 0.5, 0.3)
    config = load_config(str(path)).with_overrides(max_tokens=100)
    assert (config.max_tokens, config.max_fraction) == (100, None)


def test_config_show_prints_the_effective_configuration(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(TOML)
    result = invoke("config", "show", "--config", str(path), "--max-tokens", "7000", "--model", "gpt-4o")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["max_tokens"] == 7000 and shown["max_fraction"] is None and shown["max_messages"] == 50
    assert shown["strategies"][0] == {"kind": "clear_tool_results", "keep_pairs": 5, "keep_recent": 0.5}
    assert shown["resolved"] == {"encoder": "o200k_base", "window": 128000, "window_resolved": True}
    # What config show prints is itself a valid config file (less the resolved values).
    shown.pop("resolved")
    again = tmp_path / "again.json"
    again.write_text(json.dumps(shown))
    assert load_config(str(again)).max_tokens == 7000


def test_default_config_matches_the_seed() -> None:
    """The seed's list and parameters are the `seed` preset, unchanged; the default list is measured."""
    seed = MemoryConfig(preset="seed")
    assert [str(s) for s in seed.strategies] == [
        "offload:turns=10", "summarize:turns=10,max_tokens=2048", "deduplicate_file_reads:tool_name=read_file",
        "clear_tool_results:keep_pairs=3,keep_recent=0.0", "clamp_oversized_messages:max_part_tokens=4096",
        "sliding_window:keep_messages=40", "drop_observations", "drop_turns",
    ]
    assert seed.summarizer_in_use is None and seed.policy.name == "seed"
    config = MemoryConfig()
    assert [str(s) for s in config.strategies] == [
        "drop_old_thinking", "deduplicate_file_reads", "supersede_plans", "clear_tool_results",
        "clamp_oversized_messages", "summarize", "sliding_window", "drop_observations", "drop_turns",
    ]
    assert config.summarizer_in_use == "extractive" and config.policy.name == "default"
    defaults = {name: strategies.get(name).defaults() for name in strategies.NAMES}
    # Budget first: no message cap and no fixed span unless asked for.
    assert defaults["sliding_window"] == {"keep_messages": None}
    assert defaults["summarize"]["turns"] is None
    assert defaults["summarize"]["max_tokens"] == 4096  # the seed preset keeps its 2048
    assert defaults["clear_tool_results"] == {"keep_pairs": 3, "keep_recent": 0.5}
    assert config.max_fraction == 0.8 and config.context_window_tokens == 128_000


def test_schema_and_registry_agree_on_every_strategy_parameter() -> None:
    rules = load_schema("config")["$defs"]["strategy"]["allOf"]
    for name in strategies.NAMES:
        info = strategies.get(name)
        rule = next(r for r in rules if info.name in r["if"]["properties"]["kind"]["enum"])
        assert info.alias in rule["if"]["properties"]["kind"]["enum"]
        assert set(rule["then"]["properties"]) - {"kind"} == {p.name for p in info.params}


def test_camel_case_aliases_are_accepted_on_the_command_line() -> None:
    assert StrategySpec.parse("SlidingWindow:keep_messages=4") == StrategySpec("sliding_window", {"keep_messages": 4})


SESSION = str(Path(__file__).resolve().parent.parent / "sample_transcripts" / "agent_session.jsonl")
NON_FINITE = {
    # NaN passes every minimum and maximum; it must be refused like `share=inf`, not crash or do nothing.
    "-s share=nan": ((), ["-s", "summarize:share=nan"], "strategy summarize: share: nan"),
    "-s keep_recent=nan": ((), ["-s", "clear_tool_results:keep_recent=nan"], "strategy clear_tool_results: keep_recent: nan"),
    "-s keep_recent=-inf": ((), ["-s", "clear_tool_results:keep_recent=-inf"], "keep_recent: -inf"),
    "config chars_per_token = nan": (("chars_per_token = nan",), ["--encoder", "heuristic"], "chars_per_token: nan"),
    "config share = nan": (('[[strategies]]', 'kind = "summarize"', "share = nan"), [], "strategies[0].share: nan"),
    "config keep_recent = inf": (('[[strategies]]', 'kind = "clear_tool_results"', "keep_recent = inf"), [],
                                 "strategies[0].keep_recent: inf"),
}


@pytest.mark.parametrize(("toml", "args", "says"), NON_FINITE.values(), ids=NON_FINITE.keys())
def test_a_non_finite_number_is_refused_up_front_wherever_it_is_given(
    tmp_path: Path, toml: tuple[str, ...], args: list[str], says: str,
) -> None:
    config = tmp_path / "c.toml"
    config.write_text("\n".join(toml) + "\n")
    result = invoke(SESSION, "--max-tokens", "2000", "-c", str(config), *args, "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compact: error: "), result.stderr
    assert says in lines[0] and "not a finite number" in lines[0], lines[0]
    assert not (tmp_path / "out.jsonl").exists()
