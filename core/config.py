"""MemoryConfig: the settings of a run, from defaults, a TOML/JSON file and flags (in that order)."""

from __future__ import annotations

import bisect
import functools
import re
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import orjson

from core import strategies
from core.counting.model_table import DEFAULT_ENCODING, lookup_model
from core.engine import closing, policy
from core.engine.policy import Policy
from core.engine.settings import RunSettings, Step
from core.engine.structure import KeepRule
from core.errors import ConfigError
from core.io.schema_loader import load_schema, validator

WARNING_MARKER = "CUCA context warning:"
GRAPH_MARKER = "CUCA graph memory:"
DEFAULT_WINDOW = 128_000
DEFAULT_MAX_FRACTION = 0.8
# The schema's bound on every count (tokens, messages, bytes): far past any real transcript,
# and exact in the 64-bit integers of JSON reports and SQLite.
MAX_COUNT = 10**15
_COUNT_FIELDS = ("max_messages", "max_tokens", "context_window_tokens", "offload_turns", "store_max_bytes")


@dataclass(frozen=True)
class StrategySpec:
    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(cls, kind: str, params: dict[str, Any]) -> StrategySpec:
        info = strategies.get(kind)
        known = {p.name: p for p in info.params}
        for name in params:
            if name not in known:
                accepted = ", ".join(known) or "no parameters"
                raise ConfigError(f"strategy {info.name} has no parameter {name!r}", fix=f"it takes {accepted}")
        _check_against_schema(info.name, params)
        return cls(info.name, dict(params))

    @classmethod
    def parse(cls, text: str) -> StrategySpec:
        """``NAME[:key=value,...]`` as given to ``--strategy``."""
        name, _, rest = text.partition(":")
        info = strategies.get(name.strip())
        types = {p.name: p.type for p in info.params}
        params: dict[str, Any] = {}
        for item in filter(None, (piece.strip() for piece in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq:
                raise ConfigError(f"invalid strategy parameter {item!r} in {text!r}", fix="write key=value")
            key = key.strip()
            if key not in types:
                accepted = ", ".join(types) or "no parameters"
                raise ConfigError(f"strategy {info.name} has no parameter {key!r}", fix=f"it takes {accepted}")
            if key in params:  # one of the two would be ignored
                raise ConfigError(f"strategy {info.name}: {key} is given twice in {text!r}", fix="give it once")
            try:
                params[key] = _coerce(types[key], value.strip())
            except ValueError:
                raise ConfigError(
                    f"strategy {info.name}: {key} must be {types[key].__name__}, not {value!r}"
                ) from None
        return cls.make(info.name, params)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params}

    def effective(self) -> dict[str, Any]:
        """Every parameter the strategy runs with: the given ones over the defaults."""
        defaults = {p.name: p.default for p in strategies.get(self.kind).params}
        return {"kind": self.kind, **defaults, **self.params}

    def __str__(self) -> str:
        if not self.params:
            return self.kind
        return self.kind + ":" + ",".join(f"{k}={v}" for k, v in self.params.items())


def _check_against_schema(kind: str, params: dict[str, Any]) -> None:
    """Flags get the same checks as config files: the schema's rules for each strategy's parameters."""
    import jsonschema

    rules = load_schema("config")["$defs"]["strategy"]
    errors = list(validator("config", finite=True).evolve(schema=rules).iter_errors({"kind": kind, **params}))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        where = best.json_path.removeprefix("$.") or kind
        raise ConfigError(f"strategy {kind}: {where}: {best.message}")


_BOOLEANS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _coerce(kind: type, value: str) -> Any:
    if kind is bool:
        if value.lower() not in _BOOLEANS:
            raise ValueError(value)
        return _BOOLEANS[value.lower()]
    return kind(value)


PRESETS = tuple(policy.POLICIES)
SUMMARIZERS = ("extractive", "openai", "none")

# The default list, chosen by bench/quality.py: what no model reads again first (earlier turns'
# thinking), cheap lossless rewrites next, then old tool output, then the oldest span
# summarized, then whatever still has to go, newest kept.
DEFAULT_LIST = (
    "drop_old_thinking",
    "deduplicate_file_reads",
    "supersede_plans",
    "clear_tool_results",
    "clamp_oversized_messages",
    "summarize",
    "sliding_window",
    "drop_observations",
    "drop_turns",
)
# The seed's list and parameters, unchanged: the seed preset reproduces the original system.
SEED_LIST: tuple[tuple[str, dict[str, Any]], ...] = (
    ("offload", {"turns": 10}),
    ("summarize", {"turns": 10, "max_tokens": 2048}),
    ("deduplicate_file_reads", {"tool_name": "read_file"}),
    ("clear_tool_results", {"keep_pairs": 3, "keep_recent": 0.0}),
    ("clamp_oversized_messages", {"max_part_tokens": 4096}),
    ("sliding_window", {"keep_messages": 40}),
    ("drop_observations", {}),
    ("drop_turns", {}),
)


def default_strategies(preset: str = "default") -> list[StrategySpec]:
    if preset == "seed":
        return [StrategySpec(name, dict(params)) for name, params in SEED_LIST]
    return [StrategySpec(name) for name in DEFAULT_LIST]


@dataclass(frozen=True)
class MemoryConfig:
    max_messages: int | None = None
    max_tokens: int | None = None
    max_fraction: float | None = DEFAULT_MAX_FRACTION
    context_window_tokens: int = DEFAULT_WINDOW
    model: str | None = None
    encoder: str | None = None
    backend: str = "auto"
    chars_per_token: float = 4.0
    framing: bool = False
    warn_fraction: float | None = None
    offload_turns: int = 2
    keep: tuple[str, ...] = ()
    warning_marker: str = WARNING_MARKER
    graph_marker: str = GRAPH_MARKER
    store: str | None = None
    store_max_bytes: int | None = None
    store_at_cap: str = "refuse"
    store_timeout: float = 30.0
    max_line_bytes: int = 256 << 20  # = core.io.transcript.DEFAULT_MAX_LINE_BYTES
    summarizer: str | None = None
    summarizer_url: str | None = None
    summarizer_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    summarizer_timeout: float = 60.0
    summarizer_retries: int = 2
    summary_prompt_file: str | None = None
    quality_retry: bool = True
    require_preserved_kinds: tuple[str, ...] = ("decision", "rationale")
    preset: str = "default"
    # None: the preset's list.
    strategies: tuple[StrategySpec, ...] | None = None
    # The closing steps after the strategies, by name, in order; None: the preset's.
    closing_steps: tuple[str, ...] | None = None

    @property
    def strategy_specs(self) -> tuple[StrategySpec, ...]:
        """The strategies in force (``strategies`` is never None after construction)."""
        return self.strategies or ()

    def __post_init__(self) -> None:
        for name in _COUNT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool) and value > MAX_COUNT:
                raise ConfigError(f"{name} {value} is too large", fix=f"use at most {MAX_COUNT:,}")
        if not (1 << 20) <= self.max_line_bytes <= (1 << 40):
            raise ConfigError(f"max_line_bytes {self.max_line_bytes} is out of range",
                              fix="give between 1 MiB (1048576) and 1 TiB")
        if not 0 < self.store_timeout <= 3600 or not 0 < self.summarizer_timeout <= 86400:
            raise ConfigError(f"store_timeout {self.store_timeout} or summarizer_timeout {self.summarizer_timeout}"
                              " is out of range", fix="store_timeout: 0-3600 s, summarizer_timeout: 0-86400 s")
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}", fix=f"use one of {', '.join(PRESETS)}")
        if self.strategies is None:
            object.__setattr__(self, "strategies", tuple(default_strategies(self.preset)))
        if self.closing_steps is not None:
            object.__setattr__(self, "closing_steps", closing.check(tuple(self.closing_steps)))
        if self.max_tokens is not None and self.max_fraction is not None:
            raise ConfigError(
                "max_tokens and max_fraction are both set; they are mutually exclusive",
                fix="keep one (in a config file, set max_fraction to null or leave it out)",
            )
        for rule in self.keep:
            parsed = KeepRule.parse(rule)
            if parsed.lines is not None and (parsed.lines[0] < 1 or parsed.lines[0] > parsed.lines[1]):
                low, high = sorted(parsed.lines)
                raise ConfigError(
                    f"keep rule {rule!r} is an empty line range",
                    fix=f"give line:A-B with 1 <= A <= B, e.g. line:{max(low, 1)}-{max(high, 1)}",
                )
        if self.summarizer not in (None, *SUMMARIZERS):
            raise ConfigError(f"unknown summarizer {self.summarizer!r}", fix="use extractive, openai or none")
        if self.summarizer == "openai" and not (self.summarizer_url and self.summarizer_model):
            raise ConfigError(
                "the openai summarizer needs a server and a model",
                fix="give --summarizer-url (e.g. http://127.0.0.1:8080/v1) and --summarizer-model",
            )
        if self.max_fraction is not None and not 0 < self.max_fraction <= 1:
            raise ConfigError(f"max_fraction must be above 0 and at most 1, not {self.max_fraction}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            # Never echo the value: a key pasted here by mistake must not reach the terminal.
            raise ConfigError(
                "--api-key-env must be the NAME of an environment variable (letters, digits, _), not a key",
                fix="e.g. --api-key-env OPENAI_API_KEY, with the key in that variable",
            )
        if self.store_at_cap not in ("refuse", "evict_oldest"):
            raise ConfigError(f"unknown store_at_cap {self.store_at_cap!r}", fix="use refuse or evict_oldest")

    # -- derived -----------------------------------------------------------

    @property
    def encoder_name(self) -> str:
        """The encoder to load: the one asked for, else the model's, else the default."""
        if self.encoder:
            return self.encoder
        model = lookup_model(self.model) if self.model else None
        return model.encoding if model else DEFAULT_ENCODING

    @property
    def summarizer_in_use(self) -> str | None:
        """The summarizer a run uses: the one asked for, else the preset's (extractive; the seed has none)."""
        if self.summarizer == "none":
            return None
        if self.summarizer is None:
            return self.policy.summarizer
        return self.summarizer

    @property
    def summarizer_calls_a_model(self) -> bool:
        """Whether the summarizer in use calls a model: it may fail (the run then exits 4, see
        ``core.report.summary_failed``) and answers differently another day (a run is not memoised)."""
        return self.summarizer_in_use == "openai"

    @property
    def policy(self) -> Policy:
        """The preset's rules (core/engine/policy.py), with the closing steps configured in force: the
        seed's has no task pin, no trace of removals, no closing step."""
        preset = policy.for_preset(self.preset)
        return preset if self.closing_steps is None else replace(preset, closing_steps=self.closing_steps)

    @property
    def encoder_implied(self) -> bool:
        return self.encoder is None and self.model is not None

    def window(self) -> tuple[int, bool]:
        """The context window and whether a model resolved it."""
        model = lookup_model(self.model) if self.model else None
        if model is not None:
            return model.window, True
        return self.context_window_tokens, False

    def keep_rules(self) -> list[KeepRule]:
        return [KeepRule.parse(rule) for rule in self.keep]

    def run_settings(self) -> RunSettings:
        """What a run of the engine is told: the strategies resolved from the registry, the policy
        and the budget's inputs (the engine reads no configuration itself)."""
        window, window_resolved = self.window()
        return RunSettings(
            steps=tuple(_step(spec) for spec in self.strategy_specs), policy=self.policy,
            max_messages=self.max_messages, max_tokens=self.max_tokens, max_fraction=self.max_fraction,
            window=window, window_resolved=window_resolved, keep=tuple(self.keep_rules()),
            warning_marker=self.warning_marker, graph_marker=self.graph_marker, warn_fraction=self.warn_fraction,
            offload_turns=self.offload_turns, model=self.model,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["keep"] = list(self.keep)
        data["require_preserved_kinds"] = list(self.require_preserved_kinds)
        data["markers"] = {"warning": data.pop("warning_marker"), "graph": data.pop("graph_marker")}
        data["strategies"] = [s.to_dict() for s in self.strategy_specs]
        data["closing_steps"] = None if self.closing_steps is None else list(self.closing_steps)
        return data

    def effective_dict(self) -> dict[str, Any]:
        """``to_dict`` with each strategy's parameters spelled out, defaults included (`compact config show`)."""
        data = self.to_dict()
        data["strategies"] = [s.effective() for s in self.strategy_specs]
        data["closing_steps"] = list(self.policy.closing_steps)  # (the preset's when none is configured)
        return data

    def with_overrides(self, **changes: Any) -> MemoryConfig:
        """Flags over the file: ``None`` means "not given". A token flag clears the other token trigger."""
        given = {k: v for k, v in changes.items() if v is not None}
        if "max_tokens" in given and "max_fraction" in given:
            raise ConfigError("--max-tokens and --max-fraction are mutually exclusive", fix="give one of them")
        if "max_tokens" in given:
            given["max_fraction"] = None
        elif "max_fraction" in given:
            given["max_tokens"] = None
        if "preset" in given and "strategies" not in given and self.strategies == tuple(default_strategies(self.preset)):
            given["strategies"] = None  # a new preset brings its own list, unless one was configured
        return replace(self, **given)

    def unlimited(self) -> MemoryConfig:
        return replace(self, max_messages=None, max_tokens=None, max_fraction=None)


def _step(spec: StrategySpec) -> Step:
    info = strategies.get(spec.kind)
    return Step(info.name, str(spec), functools.partial(info.run, params=dict(spec.params)), needs=info.needs,
                cuts_to_newest=info.cuts_to_newest)


def check_keep_lines(config: MemoryConfig, lines: list[int | None], path: str, other_lines: Sequence[int] = ()) -> None:
    """A `line:` keep rule that pins nothing is an error, before anything runs: one starting past the
    transcript's last line, or one whose lines hold no message (a format's event or metadata line,
    a blank line, a line the reader left out)."""
    starts = sorted(line for line in lines if line is not None)
    last = max(starts[-1:] + list(other_lines), default=0)
    for rule in config.keep_rules():
        if rule.lines is None:
            continue
        if rule.lines[0] > last:
            raise ConfigError(
                f"keep rule {str(rule)!r} starts past the last line ({last:,})", path=path,
                fix=f"give lines between 1 and {last:,}",
            )
        at = bisect.bisect_left(starts, rule.lines[0])
        if at == len(starts) or starts[at] > rule.lines[1]:
            first = max(0, at - 1)
            shown = ", ".join(f"{line:,}" for line in starts[first:first + 3]) + (", …" if first + 3 < len(starts) else "")
            raise ConfigError(
                f"keep rule {str(rule)!r} holds no message (messages start on lines {shown})", path=path,
                fix="give a line a message starts on",
            )


_FIELD_NAMES = {f.name for f in fields(MemoryConfig)}


def load_config(path: str) -> MemoryConfig:
    """Read, validate against schemas/config.schema.json, and build the config of a file."""
    data = _read_config_file(path)
    _validate(data, path)
    return config_from_dict(data, path)


def _read_config_file(path: str) -> dict[str, Any]:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError("no such config file", path=path, fix="check the path given to --config") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", path=path) from None
    if path.endswith(".json"):
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"malformed JSON: {exc.msg}", path=path, line=exc.lineno, column=exc.colno) from None
    else:
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            where = re.search(r" \(at line (\d+), column (\d+)\)$", str(exc))
            what = str(exc)[: where.start()] if where else str(exc)
            line, column = (int(where.group(1)), int(where.group(2))) if where else (None, None)
            raise ConfigError(f"malformed TOML: {what}", path=path, line=line, column=column,
                              fix="a .json file is read as JSON") from None
        except RecursionError:
            raise ConfigError("malformed TOML: nested too deeply", path=path) from None
    if not isinstance(data, dict):
        raise ConfigError("the config must be a table/object of settings", path=path)
    return data


def _validate(data: dict[str, Any], path: str) -> None:
    for key in data:
        if key not in _FIELD_NAMES | {"markers"} or key in ("warning_marker", "graph_marker"):
            import difflib

            near = difflib.get_close_matches(key, sorted(_FIELD_NAMES | {"markers"}), n=1)
            hint = f"did you mean {near[0]!r}?" if near else "see `compact config show` for the keys"
            raise ConfigError(f"unknown key {key!r}", path=path, fix=hint)
    errors = sorted(validator("config", finite=True).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        import jsonschema.exceptions

        best = jsonschema.exceptions.best_match(errors)
        where = best.json_path.removeprefix("$.") if best.path else "config"
        raise ConfigError(f"{where}: {best.message}", path=path)


def config_from_dict(data: dict[str, Any], path: str = "<config>") -> MemoryConfig:
    values = {k: v for k, v in data.items() if k not in ("markers", "strategies", "keep")}
    if "max_tokens" in data and data["max_tokens"] is not None and "max_fraction" not in data:
        values["max_fraction"] = None  # setting max_tokens clears the default fraction
    markers = data.get("markers", {})
    if "warning" in markers:
        values["warning_marker"] = markers["warning"]
    if "graph" in markers:
        values["graph_marker"] = markers["graph"]
    if "keep" in data:
        values["keep"] = tuple(data["keep"])
    if data.get("closing_steps") is not None:
        values["closing_steps"] = tuple(data["closing_steps"])
    if "require_preserved_kinds" in data:
        values["require_preserved_kinds"] = tuple(data["require_preserved_kinds"])
    base = Path(path).parent
    for key in ("store", "summary_prompt_file"):
        value = values.get(key)
        if isinstance(value, str) and not Path(value).expanduser().is_absolute():
            values[key] = str(base / Path(value).expanduser())  # relative to the config file, not the cwd
    if "strategies" in data:
        specs = []
        for item in data["strategies"]:
            params = {k: v for k, v in item.items() if k != "kind"}
            specs.append(StrategySpec.make(item["kind"], params))
        values["strategies"] = tuple(specs)
    try:
        return MemoryConfig(**values)
    except ConfigError as exc:
        exc.path = exc.path or path
        raise
