"""Builders shared by the tests: messages, transcripts and CLI runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from typer.testing import CliRunner

from cli.app import app


def msg(role: str, content: Any = "", **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def assistant_calls(*calls: dict[str, Any], content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def result(call_id: str, content: str, name: str | None = None) -> dict[str, Any]:
    data = {"role": "tool", "tool_call_id": call_id, "content": content}
    if name:
        data["name"] = name
    return data


def write_messages(path: Path, messages: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


def read_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def invoke(*args: str, input: bytes | str | None = None) -> Any:
    runner = CliRunner()
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)


_COUNTER = None


def shared_counter() -> Any:
    """One loaded encoder for the whole test session (loading costs ~0.1 s)."""
    global _COUNTER
    if _COUNTER is None:
        from core.counting.tokenizers import load_counter

        _COUNTER = load_counter("cl100k_base")
    return _COUNTER


def run_core(messages: list[dict[str, Any]], *, mode: str = "budget", repair: bool = False, seams: Any = None, **settings: Any) -> Any:
    """Compact plain dicts in-process with the real tokenizer; returns the CompactionResult."""
    import orjson

    from core.config import MemoryConfig, StrategySpec
    from core.counting.counter import MessageCounter
    from core.engine.pipeline import compact
    from core.messages import Message

    if "strategies" in settings:
        settings["strategies"] = tuple(StrategySpec.parse(s) for s in settings["strategies"])
    if "keep" in settings:
        settings["keep"] = tuple(settings["keep"])
    config = MemoryConfig().with_overrides(**settings)
    counter, choice = shared_counter()
    loaded = [Message(data=m, line=i, source=orjson.dumps(m)) for i, m in enumerate(messages, start=1)]
    return compact(loaded, config.run_settings(), MessageCounter(counter), encoder=choice, mode=mode, repair=repair, seams=seams)


def lines_of(result: Any) -> list[int | None]:
    return [m.line for m in result.messages]


def invoke_with_report(*args: str, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    """Run the CLI with ``--report`` into ``tmp_path``; it must succeed. (result, the report)."""
    report = tmp_path / "report.json"
    outcome = invoke(*args, "--report", str(report))
    assert outcome.exit_code == 0, outcome.output
    return outcome, json.loads(report.read_text())


def check_bad_line(broken: Path, line: int, tmp_path: Path, *args: str) -> tuple[Any, bytes, dict[str, Any]]:
    """A bad line stops a run (``args``) with one error line naming FILE:LINE (exit 2); with
    ``--unlimited --skip-invalid`` the file comes back byte for byte without that line, and the report lists it.

    Returns the failed run, the kept output and the report, for the caller's own checks.
    """
    failed = invoke(str(broken), *args)
    assert failed.exit_code == 2
    assert failed.stderr.count("\n") == 1 and f"{broken}:{line}:" in failed.stderr, failed.stderr
    out, report = tmp_path / "kept.jsonl", tmp_path / "kept.report.json"
    kept = invoke(str(broken), "--unlimited", "--skip-invalid", "-o", str(out), "--report", str(report))
    assert kept.exit_code == 0, kept.output
    lines = broken.read_bytes().splitlines(keepends=True)
    assert out.read_bytes() == b"".join(lines[: line - 1] + lines[line:])
    skipped = json.loads(report.read_text())
    assert [s["line"] for s in skipped["skipped_lines"]] == [line]
    return failed, out.read_bytes(), skipped


def load_bench(script: str, name: str) -> ModuleType:
    """A script of bench/ imported as module ``name`` (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent.parent / "bench" / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
