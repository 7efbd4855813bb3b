"""The options, declared once: typer aliases, and the groups `run` and `batch` share as frozen values.

A command declares a parameter typed with a group (``settings: SettingsFlags``);
:func:`takes` spreads the group's fields into the command's signature for typer, and
gathers them back into one frozen value when the command runs. So `compact FILE` and
`compact batch` list the compaction options once, here, and build the settings
(:meth:`SettingsFlags.build`) and the run options (:meth:`RunFlags.options`) the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from cli.help import BUDGET, COUNTING, GRAPH, INPUT, OTHER, OUTPUT, STRATEGIES, SUMMARIZER
from core.errors import ConfigError

FORMATS = "openai, dataset, anthropic, claude-code, responses, codex, codex-exec, pi, gemini-stream, gemini-session, gemini-chat, sharegpt"  # = core.formats.names()


class TableOrJson(StrEnum):
    table = "table"
    json = "json"


# -- the settings: defaults, then the config file, then these flags ---------------------------------

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML or JSON config file; flags override it.", dir_okay=False, rich_help_panel=BUDGET)]
MaxTokensOpt = Annotated[int | None, typer.Option("--max-tokens", min=1, help="Compact until under N tokens.", rich_help_panel=BUDGET)]
MaxMessagesOpt = Annotated[int | None, typer.Option("--max-messages", min=1, help="Compact until at most N messages.", rich_help_panel=BUDGET)]
def _fraction(value: float | None) -> float | None:
    # A range check alone takes nan for a number over 1 ("less than or equal to 1").
    if value is not None and not 0 <= value <= 1:
        raise typer.BadParameter(f"must be a number from 0 to 1, not {value}")
    return value


# An option whose default lives in the settings is declared None (a config file may set it): its
# show_default says the default the settings give, so the help writes it as typer writes any other.
MaxFractionOpt = Annotated[float | None, typer.Option("--max-fraction", callback=_fraction, help="Compact until under F (0-1) of the window.", show_default="0.8", rich_help_panel=BUDGET)]
WindowOpt = Annotated[int | None, typer.Option("--context-window", min=1, help="Window when --model sets none.", show_default="128000", rich_help_panel=COUNTING)]
ModelOpt = Annotated[str | None, typer.Option("--model", metavar="NAME", help="Model (gpt-4o, claude-opus-5-5, …): sets window and encoder, and whether the current turn's thinking can stay.", rich_help_panel=BUDGET)]
EncoderOpt = Annotated[str | None, typer.Option("--encoder", metavar="NAME", help="tiktoken encoding, model, or heuristic.", show_default="cl100k_base", rich_help_panel=COUNTING)]
BackendOpt = Annotated[str | None, typer.Option("--backend", metavar="auto|tiktoken|bpe", help="Tokenizer backend.", show_default="auto", rich_help_panel=COUNTING)]
CharsOpt = Annotated[float | None, typer.Option("--chars-per-token", min=0.1, help="Ratio for --encoder heuristic.", show_default="4.0", rich_help_panel=COUNTING)]
FramingOpt = Annotated[bool | None, typer.Option("--framing/--no-framing", help="Count framing tokens.", show_default="no-framing", rich_help_panel=COUNTING)]
WarnOpt = Annotated[float | None, typer.Option("--warn-fraction", min=0.0, max=1.0, help="Warn the model at F (0-1) of the window.", rich_help_panel=STRATEGIES)]
TurnsOpt = Annotated[int | None, typer.Option("--offload-turns", min=1, help="Turns per drop_turns pass.", show_default="2", rich_help_panel=STRATEGIES)]
StrategyOpt = Annotated[list[str] | None, typer.Option("--strategy", "-s", metavar="NAME[:k=v,...]", help="Ordered strategy list; repeat.", rich_help_panel=STRATEGIES)]
PresetOpt = Annotated[str | None, typer.Option("--preset", metavar="default|seed", help="Strategy list and rules: default, or seed (the original ones).", show_default="default", rich_help_panel=STRATEGIES)]
KeepOpt = Annotated[list[str] | None, typer.Option("--keep", "-k", metavar="RULE", help="Pin: role:NAME, tool:NAME, match:REGEX, line:N, line:A-B.", rich_help_panel=STRATEGIES)]
StoreOpt = Annotated[str | None, typer.Option("--store", metavar="PATH", envvar="COMPACT_STORE", help="SQLite offload store (enables offload, recall).", rich_help_panel=STRATEGIES)]
ExistingStoreOpt = Annotated[str | None, typer.Option(
    "--store", metavar="PATH", envvar="COMPACT_STORE", show_envvar=True, show_default=False,
    help="The offload store (a SQLite file); never created by this command.")]
SummarizerOpt = Annotated[str | None, typer.Option("--summarizer", metavar="extractive|openai|none", help="Who summarizes what is removed.", show_default="extractive (none under --preset seed)", rich_help_panel=SUMMARIZER)]
SummarizerUrlOpt = Annotated[str | None, typer.Option("--summarizer-url", metavar="URL", help="Chat-completions server: http://HOST/v1.", rich_help_panel=SUMMARIZER)]
SummarizerModelOpt = Annotated[str | None, typer.Option("--summarizer-model", metavar="NAME", help="Model name sent to the server.", rich_help_panel=SUMMARIZER)]
ApiKeyEnvOpt = Annotated[str | None, typer.Option("--api-key-env", metavar="NAME", help="API key variable.", show_default="OPENAI_API_KEY", rich_help_panel=SUMMARIZER)]
SummaryPromptOpt = Annotated[str | None, typer.Option("--summary-prompt", metavar="FILE", help="Replace the summary system prompt.", rich_help_panel=SUMMARIZER)]
QualityRetryOpt = Annotated[bool | None, typer.Option("--quality-retry/--no-quality-retry", help="Ask again when a summary misses something.", show_default="quality-retry", rich_help_panel=SUMMARIZER)]
MaxLineOpt = Annotated[int | None, typer.Option("--max-line-bytes", metavar="N", help="Refuse a line over N bytes.", show_default="256 MiB", rich_help_panel=INPUT)]

# -- how each input is run ---------------------------------------------------------------------------

FromOpt = Annotated[str | None, typer.Option("--from", metavar="FORMAT", help=f"Read FILE as FORMAT instead of detecting it: {FORMATS}.", rich_help_panel=INPUT)]
ToOpt = Annotated[str | None, typer.Option("--to", metavar="FORMAT", help="Write in FORMAT.", show_default="the input's", rich_help_panel=OUTPUT)]
FullOpt = Annotated[bool, typer.Option("--full", help="Run every strategy once, whatever the budget.", rich_help_panel=STRATEGIES)]
UnlimitedOpt = Annotated[bool, typer.Option("--unlimited", help="Compact nothing: count, warn, convert.", rich_help_panel=STRATEGIES)]
RepairOpt = Annotated[bool, typer.Option("--repair", help="Drop calls without results and vice versa; write one-id tool_call_ids as tool_call_id.", rich_help_panel=INPUT)]
SkipInvalidOpt = Annotated[bool, typer.Option("--skip-invalid", help="Leave invalid lines out of the output.", rich_help_panel=INPUT)]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Skip the persistent token-count cache.", rich_help_panel=COUNTING)]
CheckForOpt = Annotated[str | None, typer.Option("--check-for", metavar="openai|anthropic|responses", help="Refuse a result the API would reject.", rich_help_panel=OUTPUT)]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Exit 3 when still over budget.", rich_help_panel=OUTPUT)]
GraphOpt = Annotated[Path | None, typer.Option("--graph", metavar="SNAPSHOT", help="Working graph to render in.", dir_okay=False, rich_help_panel=GRAPH)]
GraphMergeOpt = Annotated[Path | None, typer.Option("--graph-merge", metavar="DELTA", help="Merge DELTA into --graph first.", dir_okay=False, rich_help_panel=GRAPH)]
MergePolicyOpt = Annotated[str, typer.Option("--merge-policy", metavar="keep_existing|prefer_incoming|merge", help="On an id conflict.", rich_help_panel=GRAPH)]
MergeWeightsOpt = Annotated[str, typer.Option("--merge-weights", metavar="incoming|max|sum", help="How weights combine.", rich_help_panel=GRAPH)]
GraphOutOpt = Annotated[Path | None, typer.Option("--graph-out", help="Write the resulting graph.", dir_okay=False, rich_help_panel=GRAPH)]
GraphNodesOpt = Annotated[int, typer.Option("--graph-max-nodes", min=0, help="Most nodes shown.", rich_help_panel=GRAPH)]
GraphRelsOpt = Annotated[int, typer.Option("--graph-max-relationships", min=0, help="Most relationships shown.", rich_help_panel=GRAPH)]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks.", rich_help_panel=OTHER)]


@dataclass(frozen=True)
class SettingsFlags:
    """The flags that make the settings (a MemoryConfig), over the config file."""

    max_tokens: MaxTokensOpt = None
    max_messages: MaxMessagesOpt = None
    max_fraction: MaxFractionOpt = None
    context_window: WindowOpt = None
    model: ModelOpt = None
    encoder: EncoderOpt = None
    backend: BackendOpt = None
    chars_per_token: CharsOpt = None
    framing: FramingOpt = None
    warn_fraction: WarnOpt = None
    offload_turns: TurnsOpt = None
    strategy: StrategyOpt = None
    preset: PresetOpt = None
    keep: KeepOpt = None
    config: ConfigOpt = None
    store: StoreOpt = None
    summarizer: SummarizerOpt = None
    summarizer_url: SummarizerUrlOpt = None
    summarizer_model: SummarizerModelOpt = None
    api_key_env: ApiKeyEnvOpt = None
    summary_prompt: SummaryPromptOpt = None
    quality_retry: QualityRetryOpt = None
    max_line_bytes: MaxLineOpt = None

    def budget_flag(self) -> str | None:
        """The budget flag given on the command line, if any."""
        given = [("--max-tokens", self.max_tokens), ("--max-messages", self.max_messages),
                 ("--max-fraction", self.max_fraction)]
        return next((name for name, value in given if value is not None), None)

    def build(self, *, quiet: bool = False) -> Any:
        """The MemoryConfig: the config file (or the defaults), these flags over it (``quiet``: -q, no warning)."""
        flags = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "config"}
        flags["summary_prompt_file"] = flags.pop("summary_prompt")
        return build_config(self.config, quiet=quiet, **flags)


@dataclass(frozen=True)
class RunFlags:
    """The flags that say how each input is run (a RunOptions), shared by `compact FILE` and `compact batch`."""

    source_format: FromOpt = None
    target_format: ToOpt = None
    full: FullOpt = False
    unlimited: UnlimitedOpt = False
    repair: RepairOpt = False
    skip_invalid: SkipInvalidOpt = False
    no_cache: NoCacheOpt = False
    check_for: CheckForOpt = None
    strict: StrictOpt = False
    graph: GraphOpt = None
    graph_merge: GraphMergeOpt = None
    merge_policy: MergePolicyOpt = "merge"
    merge_weights: MergeWeightsOpt = "incoming"
    graph_out: GraphOutOpt = None
    graph_max_nodes: GraphNodesOpt = 64
    graph_max_relationships: GraphRelsOpt = 128
    debug: DebugOpt = False

    def options(self, *, dry_run: bool = False, budget: str | None = None) -> Any:
        """The RunOptions, every combination checked here, before any work (a summarizer may cost money).
        ``budget``: the budget flag given, which --unlimited would ignore."""
        from core.api import GraphOptions, RunOptions, working_graph

        mode = RunOptions.mode_of(full=self.full, unlimited=self.unlimited)
        if self.unlimited and budget is not None:
            raise ConfigError(f"--unlimited compacts nothing, so {budget} would be ignored", fix="give one of them")
        graph = None
        if self.graph is not None:
            graph = GraphOptions(str(self.graph), str(self.graph_merge) if self.graph_merge else None,
                                 self.merge_policy, self.merge_weights, self.graph_max_nodes,
                                 self.graph_max_relationships)
            working_graph(graph)  # an invalid snapshot or delta is refused here, before any input is read
        elif self.graph_merge is not None or self.graph_out is not None:
            raise ConfigError("--graph-merge and --graph-out need --graph SNAPSHOT")
        return RunOptions(mode=mode, repair=self.repair, skip_invalid=self.skip_invalid, use_cache=not self.no_cache,
                          source_format=self.source_format, target_format=self.target_format,
                          check_for=self.check_for, graph=graph, dry_run=dry_run)

    def graph_output(self, options: Any) -> tuple[Path, Iterable[bytes]] | None:
        """--graph-out: where, and the snapshot of the working graph the results were rendered with."""
        if options.graph is None or self.graph_out is None:
            return None
        from core.api import working_graph
        from core.graph import dump_snapshot_chunks

        return self.graph_out, dump_snapshot_chunks(working_graph(options.graph).graph)

    def save_graph(self, options: Any) -> None:
        """--graph-out, written on its own (`compact batch`, whose outputs are each written as they finish)."""
        graph = self.graph_output(options)
        if graph is not None:
            from core.io.staged import atomic_write_chunks

            atomic_write_chunks(*graph)


@dataclass(frozen=True)
class CountingFlags:
    """How to count, and nothing else: the flags of `count`, `stats` and `diff`."""

    model: ModelOpt = None
    encoder: EncoderOpt = None
    backend: BackendOpt = None
    chars_per_token: CharsOpt = None
    framing: FramingOpt = None
    config: ConfigOpt = None
    no_cache: NoCacheOpt = False

    def build(self, **more: Any) -> Any:
        """The MemoryConfig that says how to count (``more``: other flags given, e.g. context_window)."""
        return build_config(self.config, model=self.model, encoder=self.encoder, backend=self.backend,
                            chars_per_token=self.chars_per_token, framing=self.framing, **more)


F = TypeVar("F", bound=Callable[..., Any])


def takes(command: F) -> F:
    """Spread each parameter typed with a flags group into the group's options, for typer; gather them back on call."""
    hints = typing.get_type_hints(command, include_extras=True)
    groups: dict[str, Any] = {}
    params: list[inspect.Parameter] = []
    for param in inspect.signature(command).parameters.values():
        kind = hints[param.name]
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            params.append(param.replace(annotation=kind))
            continue
        groups[param.name] = kind
        fields = typing.get_type_hints(kind, include_extras=True)
        params.extend(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                        annotation=fields[f.name]) for f in dataclasses.fields(kind))
    # Required parameters (the arguments, --out) first, then the command's own options (-o, --report), then
    # its groups': each keyword-only, in declared order. The help lists them in this order.
    spread = {f.name for kind in groups.values() for f in dataclasses.fields(kind)}
    required = [p for p in params if p.default is inspect.Parameter.empty]
    optional = sorted((p for p in params if p.default is not inspect.Parameter.empty), key=lambda p: p.name in spread)
    rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in optional]

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        for name, kind in groups.items():
            values[name] = kind(**{f.name: values.pop(f.name) for f in dataclasses.fields(kind)})
        return command(**values)

    run.__signature__ = inspect.Signature([*required, *rest])  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    return typing.cast(F, run)


def build_config(
    config: Path | None,
    *,
    context_window: int | None = None,
    strategy: list[str] | None = None,
    keep: list[str] | None = None,
    quiet: bool = False,
    **flags: Any,
) -> Any:
    """The settings: the config file (or the defaults), then the flags given (None: not given); an
    unknown model or an unset key variable is a warning line unless ``quiet`` (-q)."""
    from core.config import MemoryConfig, StrategySpec, load_config

    base = load_config(str(config)) if config is not None else MemoryConfig()
    strategies = tuple(StrategySpec.parse(s) for s in strategy) if strategy else None
    settings = base.with_overrides(context_window_tokens=context_window, strategies=strategies,
                                   keep=(*base.keep, *keep) if keep else None, **flags)
    if not quiet:
        _warn_unknown_model(settings)
        named = flags.get("api_key_env") is not None or base.api_key_env != MemoryConfig.api_key_env
        _warn_unset_key(settings, named)
    return settings


def _warn_unset_key(settings: Any, named: bool) -> None:
    """A key variable the user named but did not set: the requests go without a key, said once, up front.

    The default variable, not named, stays quiet: many local servers take no key.
    """
    import os

    if settings.summarizer != "openai" or not named:
        return
    if not os.environ.get(settings.api_key_env, "").strip():
        sys.stderr.write(f"compact: warning: ${settings.api_key_env} is not set: "
                         "the summarizer's requests go without an API key\n")


def _warn_unknown_model(settings: Any) -> None:
    """An unknown --model still runs (on the default window and encoder), but never silently."""
    from core.counting.model_table import lookup_model, nearest_models

    if not settings.model or lookup_model(settings.model) is not None:
        return
    window, _ = settings.window()
    near = nearest_models(settings.model)
    hint = f"did you mean {', '.join(near)}?" if near else "`compact config show` shows the effective settings"
    sys.stderr.write(
        f"compact: warning: unknown model {settings.model!r}: using a {window:,}-token window and the "
        f"{settings.encoder_name} encoder ({hint})\n"
    )
