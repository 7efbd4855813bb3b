"""Deterministic generator of realistic coding-agent transcripts (canonical OpenAI Chat JSONL).

One message per line: a long system prompt, user turns, assistant messages with text and/or
`tool_calls`, and exactly one `tool` result per call right after its assistant message.
Tools: read_file, write_file, edit_file, run_shell, search. About 30% of reads re-read a path
(after an edit, with changed content), some calls run 2-4 in parallel, and tool outputs are
built from generated Python/TypeScript code and logs so they tokenize like the real thing.
At the default scale 10k messages weigh about 50 MB.

    python bench/generate.py --messages 10000 --seed 0 -o out.jsonl
    generate(10000, seed=0)  # iterator of JSONL lines: bytes, each ending in a newline

Standard library and orjson only, so the benchmarks need nothing else installed.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
from collections.abc import Callable, Iterator
from functools import lru_cache

import orjson

VERBS = ["load", "parse", "build", "fetch", "render", "validate", "resolve", "merge", "split", "apply", "compute", "update", "create", "sync", "flush", "encode", "decode", "normalize", "serialize", "collect", "filter", "register", "dispatch", "refresh", "schedule", "retry", "emit", "handle", "format", "compile", "check", "ensure", "extract", "convert", "wrap", "transform", "lookup", "prune", "evict", "hydrate", "rotate", "stream", "batch"]
NOUNS = ["config", "user", "session", "token", "cache", "index", "record", "payload", "message", "request", "response", "handler", "client", "queue", "worker", "job", "task", "event", "schema", "field", "column", "table", "row", "chunk", "buffer", "stream", "path", "node", "edge", "graph", "report", "metric", "span", "trace", "budget", "window", "strategy", "summary", "store", "entry", "item", "result", "error", "timeout", "limit", "offset", "cursor", "page", "account", "invoice", "order", "price", "customer", "address", "tenant", "snapshot", "manifest"]
ADJS = ["raw", "cached", "pending", "active", "default", "local", "remote", "stale", "partial", "sorted", "unique", "nested", "optional", "valid", "current", "previous", "next", "max", "min", "total"]
PY_TYPES = ("str", "int", "float", "bool", "bytes", "Path", "dict[str, Any]", "list[str]",
            "Sequence[int]", "str | None", "Iterable[Record]")
NUMBERS = (0, 1, 2, 3, 5, 8, 10, 16, 30, 64, 100, 256, 1000, 4096)
PROJECTS = ("ledgerline", "taskforge", "quillmark", "harborctl", "metricsd", "pipewright")
ALNUM = string.ascii_letters + string.digits
# Share of tool outputs that are 20-60 KB; the rest are 1-8 KB. Calibrated: ~5 KB per message.
LARGE_OUTPUT_SHARE = 0.15

# Templates are filled by _slots: a-d are distinct local names, f a function, C a class.
PY_STATEMENTS = (
    "{a} = {f}({b}, {c}={n})",
    "if {a} is None:\n    raise ValueError(f\"{a} must be set, got {{{b}!r}}\")",
    "for {b} in {a}:\n    if not {b}.{c}:\n        continue\n    {d}.append({f}({b}))",
    ("try:\n    {a} = self._{b}[{c}]\nexcept KeyError:\n"
    "    logger.warning(\"missing {noun} %s\", {c})\n    {a} = {C}()"),
    "{a} = [{b} for {b} in {c} if {b}.{d} > {n}]",
    "with open({a}, encoding=\"utf-8\") as fh:\n    {b} = json.load(fh)",
    "self._{a} = {b} or {{}}",
    "logger.debug(\"{verb} %d {nouns} in %.2fs\", len({a}), time.monotonic() - {b})",
    "{a}: dict[str, {C}] = {{}}",
    ("if len({a}) > self.max_{nouns}:\n"
    "    # Keep the newest ones: older {nouns} are already persisted.\n"
    "    {a} = {a}[-self.max_{nouns}:]"),
    "assert {a} is not None, \"{noun} must be loaded before {verb}\"",
    "{a}.update({b}={c}, {d}={n})",
    "while {a} and {a}[0].{b} < {c}:\n    {a}.pop(0)",
    "{a} = {b}.get(\"{noun}\", {n})",
    "{a} = {C}.from_dict({{\"{b}\": {c}, \"{d}\": {n}}})",
    "if isinstance({a}, {C}):\n    return {a}.{f}()",
    "{a} = sorted({b}, key=lambda {c}: ({c}.{d}, -{c}.{noun}_id))",
)
JS_STATEMENTS = (
    "const {a} = await {f}({b}, {{ {c}: {n} }});",
    "if (!{a}) {{\n  throw new Error(`{noun} ${{{b}}} not found`);\n}}",
    "for (const {b} of {a}) {{\n  if ({b}.{c} > {n}) {{\n    {d}.push({b});\n  }}\n}}",
    "const {c} = {a}.filter(({b}) => {b}.{d}).map(({b}) => {b}.{noun}Id);",
    "const {{ {a}, {b} }} = {c};",
    ("try {{\n  await {f}({a});\n}} catch (err) {{\n  logger.error('{verb} {noun} failed', err);\n"
    "  throw err;\n}}"),
    "{a}.set({b}, Date.now() + {n});",
    "let {a} = {n};",
    "console.debug(`{verb} ${{{a}.length}} {nouns}`);",
    "this.{a} = {b} ?? {c};",
    "// Debounce: the {noun} store emits once per keystroke.\nconst {a} = debounce({f}, {n});",
    "const {a}: {C}[] = [];",
    "if ({a}.status !== {n}) return null;",
)
# (indent of {body}, template). The first two Python blocks are functions, reused as methods.
PY_BLOCKS = (
    ("    ", ("def {f}({a}: {T}, {b}: {T2} | None = None) -> {T}:\n"
     "    \"\"\"{Verb} the {adj} {noun} for {b}.\"\"\"\n{body}\n    return {c}\n\n\n")),
    ("    ", ("def {f}({a}: {T}, *, {b}: int = {n}) -> {T2}:\n    \"\"\"{Verb} the {adj} {noun}.\n\n"
     "    Args:\n        {a}: The {noun} to {verb}.\n"
     "        {b}: Upper bound, or 0 for no limit.\n\n"
     "    Raises:\n        KeyError: If the {noun} is not registered.\n    \"\"\"\n{body}\n"
     "    return {c}\n\n\n")),
    ("", ("class {C}:\n    \"\"\"{Adj} {noun} kept by the {verb} loop.\"\"\"\n\n    def "
     "__init__(self, {a}: {T}, {b}: {T2} | None = None) -> None:\n        self._{a} = {a}\n        "
     "self._{b} = {b} or {{}}\n\n{methods}\n\n\n")),
    ("    ", ("def test_{f}_{adj}_{noun}(tmp_path):\n{body}\n    assert {f}({a}) == {n}\n"
     "    assert not {b}.{c}\n\n\n")),
)
JS_BLOCKS = (
    ("  ", "export async function {f}({a}, {b} = {{}}) {{\n{body}\n  return {c};\n}}\n\n"),
    ("  ", "export const {f} = ({a}, {b}) => {{\n{body}\n  return {c};\n}};\n\n"),
    ("    ", ("export class {C} {{\n  constructor({a}, {b} = {{}}) {{\n    this.{a} = {a};\n  }}"
     "\n\n  async {f}({c}) {{\n{body}\n    return this.{a};\n  }}\n}}\n\n")),
    ("    ", ("describe('{f}', () => {{\n  it('{verbs} the {adj} {noun}', async () => {{\n{body}"
     "\n    expect({a}.{c}).toBe({n});\n  }});\n}});\n\n")),
)


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.title() for word in rest)


def _plural(word: str) -> str:
    if word.endswith("y"):
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "ch", "x")) else "s")


def _slots(rng: random.Random, camel: bool = False) -> dict[str, object]:
    """Fresh names for one template."""
    nouns = rng.sample(NOUNS, 4)
    names = [f"{rng.choice(ADJS)}_{noun}" if rng.random() < 0.4 else noun for noun in nouns]
    func = f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
    if camel:
        names, func = [_camel(name) for name in names], _camel(func)
    verb, adj = rng.choice(VERBS), rng.choice(ADJS)
    return {"a": names[0], "b": names[1], "c": names[2], "d": names[3], "f": func,
            "C": adj.title() + nouns[1].title() + rng.choice(("", "Store", "Error")),
            "n": rng.choice(NUMBERS), "noun": nouns[0], "nouns": _plural(nouns[0]),
            "verb": verb, "verbs": _plural(verb), "Verb": verb.title(), "adj": adj,
            "Adj": adj.title(), "T": rng.choice(PY_TYPES), "T2": rng.choice(PY_TYPES)}


def _statement(rng: random.Random, lang: str, indent: str) -> str:
    templates = PY_STATEMENTS if lang == "py" else JS_STATEMENTS
    text = rng.choice(templates).format(**_slots(rng, camel=lang == "js"))
    return "\n".join(indent + line for line in text.split("\n"))


def _block(rng: random.Random, lang: str, choices: tuple[tuple[str, str], ...] = ()) -> str:
    indent, template = rng.choice(choices or (PY_BLOCKS if lang == "py" else JS_BLOCKS))
    body = "\n".join(_statement(rng, lang, indent) for _ in range(rng.randint(2, 9)))
    methods = ""
    if "{methods}" in template:
        functions = [_block(rng, "py", PY_BLOCKS[:2]).strip().replace("(", "(self, ", 1)
                     for _ in range(rng.randint(1, 3))]
        methods = "\n\n".join("\n".join(f"    {line}" if line else "" for line in text.split("\n"))
                               for text in functions)
    return template.format(body=body, methods=methods, **_slots(rng, camel=lang == "js"))


@lru_cache(maxsize=1)
def _block_pools() -> dict[str, tuple[str, ...]]:
    """Top-level code blocks that files are assembled from, built once (the session seed picks
    among them): per-line randomness at run time would make 100k messages take minutes."""
    rng = random.Random("code-blocks")
    return {"py": tuple(_block(rng, "py") for _ in range(1500)),
            "js": tuple(_block(rng, "js") for _ in range(1000))}


SYSTEM_PROMPT = """You are an autonomous coding agent working in the repository at \
/workspace/{project}. You help the user by reading code, running commands and editing files \
with the tools below.
Work in small verified steps: reproduce a problem before fixing it, run the relevant tests after \
every change, and never claim a test passes unless you ran it in this session.

# Guidelines
- Read a file before you edit it. Files change under you: re-read after edits or failed edits.
- Prefer edit_file with a unique old_string over rewriting whole files with write_file.
- Batch independent reads in one message (parallel tool calls) to save round trips.
- run_shell runs in /workspace/{project} with a 120 s timeout; output is truncated at 64 KB.
- Keep the public API stable unless the user asks otherwise; add tests for every bug you fix.
- Follow the project style: type hints, Google-style docstrings, ruff and mypy clean.
- Do not touch migrations, vendored code, CI secrets or anything under .git.
- Never print secrets from .env files or the environment into the conversation.
- If a command fails twice the same way, stop and explain what you tried instead of looping.
- When the task is done, reply with a short summary: what changed, where, and how you checked.

# Tools (JSON schema)
{tools}

# Repository map
Python 3.11 package in src/{project}, tests in tests/ (pytest, hypothesis), TypeScript web \
client in web/src (jest). Main modules, with the functions other code calls most:
{repo_map}
"""
TOOLS = {
    "read_file": ("Read a UTF-8 text file and return its full content.", ("path",)),
    "write_file": ("Create or overwrite a file with the given content.", ("path", "content")),
    "edit_file": ("Replace exactly one occurrence of old_string with new_string in a file.",
                  ("path", "old_string", "new_string")),
    "run_shell": (("Run a shell command; returns stdout and stderr, and the exit code when it is "
                  "not 0."), ("command",)),
    "search": ("Search the repository for a regular expression; returns path:line:text matches.",
               ("pattern", "path")),
}
USER_REQUESTS = (
    ("The test `{test}` started failing after the last merge with `{error}`. Find the cause and "
    "fix it."),
    ("Please add a `--{noun}-limit` option to the `{f}` command. It should default to {n} and be "
    "validated like the other limits."),
    ("Refactor `{path}` so that `{f}` no longer reads the {noun} from disk on every call; cache "
    "it and invalidate the cache on write."),
    "Here is the traceback I get when running the CLI:\n\n```\n{trace}```\n\nWhat's going on?",
    ("CI is red on main. Run the test suite, figure out what broke, and fix it without changing the "
    "public API."),
    "Add tests for `{f}` covering the empty-{noun} and duplicate-{noun} cases.",
    "Thanks. Now update the docstrings in `{path}` and make sure ruff and mypy are clean.",
    ("That works, but `{f}` is still slow on large inputs (200k {nouns} take several seconds). "
    "Can you profile it and speed it up?"),
    ("Why does `{f}` return None when the {noun} is missing instead of raising? Make it raise "
    "KeyError and update the callers."),
    "Can you port the `{f}` helper from `{path}` to the web client in TypeScript?",
    ("Stop, don't touch the migrations. Revert the change to `{path}` and take a different "
    "approach."),
)
PREAMBLES = (
    "Let me look at `{path}` first to see how `{f}` handles the {noun}.",
    "I'll run the failing test to reproduce the error before changing anything.",
    "The traceback points at `{f}` in `{path}`. Reading it together with its test.",
    ("Found it: `{f}` assumes the {noun} is always present, but the {adj} path passes None. Fixing "
    "the guard and keeping the error message the callers match on."),
    "Searching for other callers of `{f}` before I change its signature.",
    "Re-running the tests to confirm the fix.",
    "The edit didn't apply because the file changed since I read it; re-reading it.",
    "Checking the diff before I summarise \u2014 the {noun} change should be the only one.",
    ("Two things to verify: that `{f}` is only called from the {noun} worker, and that the tests "
    "cover the {adj} case. Doing both at once."),
)
ERRORS = ("KeyError: '{a}'", "AttributeError: 'NoneType' object has no attribute '{a}'",
          "TypeError: {f}() got an unexpected keyword argument '{a}'",
          "AssertionError: assert {n} == {n2}", "ValueError: {a} must be set, got None")
LINT = ("{path}:{line}:{col}: F401 `{a}` imported but unused",
        "{path}:{line}:{col}: E501 Line too long (112 > 100)",
        "{path}:{line}:{col}: B006 Do not use mutable data structures for argument defaults",
        ("{path}:{line}: error: Incompatible types in assignment (expression has type \"{T}\", "
        "variable has type \"{T2}\")  [assignment]"),
        ("{path}:{line}: error: Item \"None\" of \"{T} | None\" has no attribute \"{a}\"  "
        "[union-attr]"))


class _Session:
    """The state of one generated session: a virtual repository the tools act on."""

    def __init__(self, seed: int, size_scale: float) -> None:
        self.rng = random.Random(seed)
        self.scale = size_scale
        self.project = self.rng.choice(PROJECTS)
        pools = _block_pools()
        self.base = {lang: len(pool) for lang, pool in pools.items()}
        self.blocks = {lang: list(pool) for lang, pool in pools.items()}  # edits append here
        self.avg = {lang: sum(map(len, pool)) / len(pool) for lang, pool in pools.items()}
        self.files: dict[str, tuple[str, str, list[int]]] = {}  # path -> (lang, header, blocks)
        self.read_paths: list[str] = []  # paths read at least once, oldest first
        self.touched: list[str] = []  # paths changed in the current turn

    def fill(self, template: str, **extra: object) -> str:
        return template.format(**_slots(self.rng), n2=self.rng.choice(NUMBERS),
                               path=self.pick_path(), test=self.test_id(), **extra)

    def output_size(self) -> int:
        kb = (self.rng.uniform(20, 60) if self.rng.random() < LARGE_OUTPUT_SHARE
              else self.rng.triangular(1, 8, 7))
        return max(200, int(kb * 1024 * self.scale))

    def test_id(self) -> str:
        rng = self.rng
        return f"tests/test_{rng.choice(NOUNS)}.py::test_{rng.choice(VERBS)}_{rng.choice(NOUNS)}"

    def pick_path(self) -> str:
        """A recently read path: agents keep working on the files they just looked at."""
        return self.rng.choice(self.read_paths[-20:]) if self.read_paths else self.new_path()

    def new_path(self) -> str:
        rng, attempt = self.rng, 0
        while True:
            noun, verb = rng.choice(NOUNS), rng.choice(VERBS)
            package, folder = f"src/{self.project}", _plural(noun)
            path = rng.choice((f"{package}/{noun}.py", f"{package}/{folder}/{verb}.py",
                               f"tests/test_{verb}_{noun}.py",
                               f"web/src/{folder}/{verb}{noun.title()}.ts"))
            attempt += 1
            if attempt > 8:  # the plain names run out after a few thousand files
                stem, _, extension = path.rpartition(".")
                path = f"{stem}_{attempt}.{extension}"
            if path not in self.files:
                return path

    def create_file(self, path: str, size: int) -> str:
        lang = "py" if path.endswith(".py") else "js"
        s = _slots(self.rng, camel=lang == "js")
        if lang == "py":
            header = (f'"""{s["Adj"]} {s["noun"]} handling for {self.project}."""\n\n'
                      "from __future__ import annotations\n\nimport json\nimport logging\n"
                      "import time\nfrom typing import Any\n\n"
                      f"from {self.project}.{s['noun']} import {s['C']}, {s['f']}\n\n"
                      "logger = logging.getLogger(__name__)\n\n\n")
        else:
            header = (f"import {{ {s['f']}, {s['C']} }} from '../{s['nouns']}/{s['b']}';\n"
                      "import logger from '../lib/logger';\n\n")
        pool, chosen, total = self.blocks[lang], [], len(header)
        # Oversample distinct blocks, then keep them until the file reaches its size.
        enough = min(self.base[lang], 2 * int(size / self.avg[lang]) + 2)
        for index in self.rng.sample(range(self.base[lang]), enough):
            if total >= size:
                break
            chosen.append(index)
            total += len(pool[index])
        self.files[path] = (lang, header, chosen)
        return self.render(path)

    def render(self, path: str) -> str:
        lang, header, blocks = self.files[path]
        return header + "".join(self.blocks[lang][index] for index in blocks)

    # -- tools: each returns (arguments, output) -----------------------------------------------
    def read_file(self, exclude: list[str]) -> tuple[dict[str, str], str]:
        recent = [path for path in self.read_paths[-20:] if path not in exclude]
        if recent and self.rng.random() < 0.30:
            path = self.rng.choice(recent)
            return {"path": path}, self.render(path)
        path = self.new_path()
        if self.rng.random() < 0.03:
            return {"path": path}, f"Error: [Errno 2] No such file or directory: '{path}'"
        self.read_paths.append(path)
        return {"path": path}, self.create_file(path, self.output_size())

    def edit_file(self) -> tuple[dict[str, str], str]:
        """Insert a statement into one block of a recently read file (as a changed copy)."""
        path = self.pick_path()
        lang, _, blocks = self.files[path]
        slot = self.rng.randrange(len(blocks))
        old_block = self.blocks[lang][blocks[slot]]
        lines = old_block.rstrip("\n").split("\n")
        start = self.rng.randrange(1, len(lines))
        old = "\n".join(lines[start:start + self.rng.randint(1, 4)])
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        new = _statement(self.rng, lang, indent) + "\n" + old
        args = {"path": path, "old_string": old, "new_string": new}
        if self.rng.random() < 0.08:
            return args, (f"Error: old_string not found in {path}. The file may have changed since "
                          "you read it; read it again and retry with the current text.")
        self.blocks[lang].append(old_block.replace(old, new, 1))
        blocks[slot] = len(self.blocks[lang]) - 1
        self.touched.append(path)
        return args, (f"Edited {path}: replaced {old.count(chr(10)) + 1} lines with " \
                     f"{new.count(chr(10)) + 1} lines.")

    def write_file(self) -> tuple[dict[str, str], str]:
        path = self.new_path()
        content = self.create_file(path, self.output_size() // 3)
        self.touched.append(path)
        return {"path": path, "content": content}, f"Wrote {len(content.encode())} bytes to {path}."

    def search(self) -> tuple[dict[str, str], str]:
        s = _slots(self.rng)
        args = {"pattern": f"{s['f']}\\(", "path": self.rng.choice(("src", "tests", "."))}
        if self.rng.random() < 0.1:
            return args, "No matches found."
        shapes = (f"def {s['f']}(", f"    {s['a']} = {s['f']}({s['b']})",
                  f"        return {s['f']}(self._{s['c']}, strict=True)")
        return args, self.lines(self.output_size() // 3, lambda: f"{self.pick_path()}:"
                                f"{self.rng.randint(1, 900)}:{self.rng.choice(shapes)}")

    def run_shell(self) -> tuple[dict[str, str], str]:
        kinds = (self.pytest, self.git_diff, self.lint, self.crash, self.small)
        command, output = self.rng.choices(kinds, weights=(40, 17, 12, 10, 21))[0]()
        return {"command": command}, output

    # -- run_shell outputs: (command, output) --------------------------------------------------
    def lines(self, size: int, make_line: Callable[[], str]) -> str:
        """Lines from ``make_line`` until they add up to ``size`` characters."""
        out, total = [], 0
        while total < size:
            out.append(make_line())
            total += len(out[-1]) + 1
        return "\n".join(out)

    def code_lines(self, count: int) -> list[str]:
        block = self.rng.choice(self.blocks["py"])
        return [line for line in block.split("\n") if line.strip()][:count]

    def pytest(self) -> tuple[str, str]:
        rng = self.rng
        progress = self.lines(self.output_size() * 3 // 4, lambda: f"{self.test_id():<70} " + (
            "PASSED" if rng.random() < 0.97 else "SKIPPED")).split("\n")
        total, failed = len(progress), rng.random() < 0.5
        lines = ["=" * 29 + " test session starts " + "=" * 29,
                 "platform linux -- Python 3.11.7, pytest-8.1.1, pluggy-1.4.0",
                 f"rootdir: /workspace/{self.project}", "configfile: pyproject.toml",
                 "plugins: cov-4.1.0, hypothesis-6.100.1", f"collected {total} items", "",
                 *(f"{line:<78} [{100 * (i + 1) // total:3d}%]" for i, line in enumerate(progress))]
        if failed:
            lines += self.pytest_failure()
        lines.append(f"{'=' * 25} {'1 failed, ' if failed else ''}{total - failed} passed in "
                     f"{rng.uniform(0.5, 40):.2f}s {'=' * 25}")
        command = rng.choice(("python -m pytest -q", "pytest -x -v",
                              f"pytest {self.test_id()} -vv"))
        return command, "\n".join(lines) + ("\n[exit code: 1]" if failed else "")

    def pytest_failure(self) -> list[str]:
        rng, test, s = self.rng, self.test_id(), _slots(self.rng)
        error = rng.choice(ERRORS).format(n2=rng.choice(NUMBERS), **s)
        lines = ["", "=" * 35 + " FAILURES " + "=" * 35,
                 f"{'_' * 30} {test.split('::')[1]} {'_' * 30}"]
        for _ in range(rng.randint(2, 6)):
            code = self.code_lines(5)
            lines += ["", *("    " + line for line in code[:-1]), ">   " + code[-1],
                      f"{self.pick_path()}:{rng.randint(10, 900)}: in {s['f']}"]
        return lines + [f"E   {error}", "", "=" * 30 + " short test summary info " + "=" * 30,
                        f"FAILED {test} - {error}"]

    def git_diff(self) -> tuple[str, str]:
        rng = self.rng

        def file_diff() -> str:
            path = self.pick_path()
            return "\n".join([f"diff --git a/{path} b/{path}",
                              f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644",
                              f"--- a/{path}", f"+++ b/{path}",
                              f"@@ -{rng.randint(1, 400)},7 +{rng.randint(1, 400)},9 @@",
                              *(rng.choice(" -+") + line for line in self.code_lines(12))])
        command = rng.choice(("git diff", "git diff HEAD~1", "git show -p"))
        return command, self.lines(self.output_size(), file_diff)

    def lint(self) -> tuple[str, str]:
        rng = self.rng
        found = self.lines(self.output_size() // 2, lambda: rng.choice(LINT).format(
            path=self.pick_path(), line=rng.randint(1, 900), col=rng.randint(1, 80), **_slots(rng)))
        summary = f"Found {found.count(chr(10)) + 1} errors in {rng.randint(1, 9)} files"
        command = rng.choice(("ruff check .", "mypy src", "ruff check . && mypy src"))
        return command, f"{found}\n{summary}\n[exit code: 1]"

    def crash(self) -> tuple[str, str]:
        rng = self.rng
        frames = self.lines(self.output_size() // 2, lambda: f'  File "/workspace/{self.project}/'
                            f'{self.pick_path()}", line {rng.randint(5, 900)}, in '
                            f"{_slots(rng)['f']}\n    {self.code_lines(3)[-1].strip()}")
        error = rng.choice(ERRORS).format(n2=1, **_slots(rng))
        return f"python -m {self.project} {rng.choice(VERBS)} --{rng.choice(NOUNS)}-limit 10", \
            f"Traceback (most recent call last):\n{frames}\n{error}\n[exit code: 1]"

    def small(self) -> tuple[str, str]:
        choice = self.rng.random()
        if choice < 0.15:
            return "pnpm test", "bash: line 1: pnpm: command not found\n[exit code: 127]"
        if choice < 0.25:
            return "python -m pytest tests/ -x", "Error: command timed out after 120 seconds"
        paths = dict.fromkeys(self.pick_path() for _ in range(self.rng.randint(1, 8)))
        return "git status --short", "\n".join(f" M {path}" for path in paths)


def _assistant_calls(session: _Session, max_calls: int) -> list[dict[str, object]]:
    """One assistant message with 1-4 tool calls (at most ``max_calls``), then their results."""
    rng = session.rng
    parallel = rng.random() < 0.22
    count = min(max_calls, rng.choice((2, 2, 3, 4))) if parallel else 1
    calls, results, reading = [], [], []
    for _ in range(count):
        name = "read_file" if parallel and rng.random() < 0.7 else rng.choices(
            ("read_file", "run_shell", "search", "edit_file", "write_file"), (40, 25, 13, 14, 8))[0]
        if name == "edit_file" and not session.read_paths:
            name = "read_file"  # an agent reads a file before it edits one
        if name == "read_file":
            args, output = session.read_file(exclude=reading)
            reading.append(args["path"])
        else:
            args, output = getattr(session, name)()
        call_id = "call_" + "".join(rng.choices(ALNUM, k=24))
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": name, "arguments": orjson.dumps(args).decode()}})
        results.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": output})
    content = None if rng.random() < 0.5 else session.fill(rng.choice(PREAMBLES))
    return [{"role": "assistant", "content": content, "tool_calls": calls}, *results]


def _user_message(session: _Session) -> str:
    request = session.rng.choice(USER_REQUESTS)
    if "{trace}" not in request:
        return session.fill(request, error=session.fill(session.rng.choice(ERRORS)))
    trace = "\n".join(session.crash()[1].split("\n")[:40])  # users paste the head, not 30 KB
    return session.fill(request, trace=trace + "\n")


def _final_reply(session: _Session) -> str:
    touched, session.touched = list(dict.fromkeys(session.touched)), []
    if not touched:
        return session.fill("I looked into it: `{f}` in `{path}` loads the {noun} lazily and the "
                            "{adj} case is already covered by `{test}`. No change is needed; what "
                            "you saw comes from the stale {c} cache, which a restart clears.")
    changes = "\n".join(session.fill("- `{file}`: {verb} the {adj} {noun} in `{f}` and guard the "
                                     "empty case.", file=path) for path in touched[:8])
    return session.fill("Done. The root cause was that `{f}` assumed the {noun} was always loaded."
                        "\n\nChanges:\n{changes}\n\nChecks: `python -m pytest -q` \u2713 all tests "
                        "pass \u2014 `ruff check .` \u2713 clean.", changes=changes)


def _system_prompt(session: _Session) -> str:
    tools = [{"type": "function", "function": {"name": name, "description": text, "parameters": {
        "type": "object", "properties": {param: {"type": "string"} for param in params},
        "required": list(params)}}} for name, (text, params) in TOOLS.items()]
    # A repository map makes the prompt as long as real agents' prompts (several KB).
    repo_map = "\n".join(f"- {session.new_path()}: "
                         + ", ".join(f"{_slots(session.rng)['f']}()" for _ in range(4))
                         for _ in range(40))
    return SYSTEM_PROMPT.format(project=session.project, repo_map=repo_map,
                                tools=orjson.dumps(tools, option=orjson.OPT_INDENT_2).decode())


def generate(n_messages: int, seed: int = 0, *, size_scale: float = 1.0) -> Iterator[bytes]:
    """Yield exactly ``n_messages`` JSONL lines (bytes ending in a newline) of one agent session.

    The same arguments always give the same bytes. ``size_scale`` multiplies tool-output sizes
    (1.0: about 5 KB per message on average). The last message is a user message or an
    assistant reply, never a call waiting for its result.
    """
    if n_messages < 2:  # checked here, not on first next(), so the caller sees it at once
        raise ValueError("n_messages must be at least 2 (a system prompt and a user message)")
    return _session_lines(n_messages, _Session(seed, size_scale))


def _session_lines(n_messages: int, session: _Session) -> Iterator[bytes]:
    yield _line({"role": "system", "content": _system_prompt(session)})
    remaining = n_messages - 1
    while remaining:
        yield _line({"role": "user", "content": _user_message(session)})
        remaining -= 1
        if not remaining:
            break
        for _ in range(session.rng.randint(2, 30)):
            if remaining < 3:  # keep room for at least one call, its result and the reply
                break
            messages = _assistant_calls(session, max_calls=remaining - 2)
            yield from map(_line, messages)
            remaining -= len(messages)
        yield _line({"role": "assistant", "content": _final_reply(session)})
        remaining -= 1


def _line(message: dict[str, object]) -> bytes:
    return orjson.dumps(message) + b"\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="number of messages (>= 2)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    parser.add_argument("--size-scale", type=float, default=1.0,
                        help="multiply tool-output sizes (1.0 is about 5 KB per message)")
    parser.add_argument("-o", "--output", help="output file (default: stdout)")
    args = parser.parse_args(argv)
    if args.messages < 2:
        parser.error("--messages must be at least 2")
    lines = generate(args.messages, args.seed, size_scale=args.size_scale)
    if args.output:
        with open(args.output, "wb") as handle:
            handle.writelines(lines)
    else:
        sys.stdout.buffer.writelines(lines)


if __name__ == "__main__":
    main()
