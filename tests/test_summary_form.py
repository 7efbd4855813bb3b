"""The offline summary's form, on real public sessions: each kept line stands on its own.

Issue 29.9: lines that meant nothing out of context (a list item without what it lists, a table
row without its table, a reasoning heading, the tail of a request cut mid-word, a line of a file
view shown as an error), a trailer the summarizer has no structure for, a topic that was only
the second request, and an unexplained marker.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import invoke, read_messages

SESSIONS = {
    "codex": "codex-cli/codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl",
    "swe-agent": "openai-chat/swe-agent-marshmallow-1867.jsonl",
    "claude-code": "claude-code/cctrace-phase0-investigation.jsonl",
    "rust-port": "claude-code/claude-reliability-python-to-rust-port.jsonl",
}
RUNS = [("codex", 2000), ("codex", 4000), ("swe-agent", 2000), ("claude-code", 2000), ("claude-code", 4000),
        ("claude-code", 8000), ("rust-port", 4000)]

# A kept quotation: "- user: …", "- assistant: …", "- assistant (thinking): …", "- error: …".
_QUOTED = re.compile(r"^- (user|assistant(?: \(thinking\))?|error|note): (.*)$")
_MARKDOWN_START = re.compile(r"^(?:[-*+] |\d+[.)] |\||#)")
_BOLD_ONLY = re.compile(r"^\*\*[^*]+\*\*:?$")
_CODE_AS_ERROR = re.compile(r"^(?:except|catch|raise|throw)\b")


def summaries(path: Path, budget: int) -> list[str]:
    result = invoke(str(path), "--max-tokens", str(budget), "--to", "openai")
    assert result.exit_code == 0, result.output
    return [m["content"] for m in read_messages(result.stdout)
            if isinstance(m.get("content"), str) and m["content"].startswith("CUCA summary:")]


def fragments(summary: str) -> list[str]:
    """The lines of ``summary`` that do not stand on their own, each with what is wrong with it."""
    found: list[str] = []
    lines = summary.splitlines()
    if "compact" not in lines[0].split("summarized by")[-1]:
        found.append(f"the marker is not explained: {lines[0]}")
    if any(line.startswith("## Preserved Kinds:") for line in lines):
        found.append("a Preserved Kinds trailer the extractive summarizer has no structure for")
    topic = re.search(r'<summary topic="([^"]*)"', summary)
    asked = [line.split("): ", 1)[1] for line in lines if line.startswith("- user asked (turn ")]
    if topic and any(request.startswith(topic.group(1).rstrip("…")) for request in asked[1:]):
        found.append(f"a topic that is only a later request: {topic.group(1)}")
    for line in lines:
        quoted = _QUOTED.match(line)
        if quoted is None:
            continue
        who, text = quoted.groups()
        if _MARKDOWN_START.match(text):
            found.append(f"a list item, table row or heading without its context: {line}")
        elif _BOLD_ONLY.match(text):
            found.append(f"a heading as if it were a finding: {line}")
        elif not re.match(r"[\w`\"'(\[~/$<]", text):
            found.append(f"a fragment cut mid-text: {line}")
        elif who == "error" and _CODE_AS_ERROR.match(text):
            found.append(f"a line of code shown as an error: {line}")
    return found


@pytest.mark.parametrize(("name", "budget"), RUNS)
def test_every_summary_line_stands_on_its_own(name: str, budget: int, realdata: Path) -> None:
    found = summaries(realdata / SESSIONS[name], budget)
    assert found, "the run wrote no summary"
    assert [problem for summary in found for problem in fragments(summary)] == []


def test_the_tail_of_a_long_request_is_quoted_in_whole_sentences(samples: Path) -> None:
    """The sample agent session's traceback request: its tail was quoted from the 400th character on
    (`- user: .from_dict({"entry": previous_field, "price": 3})`)."""
    for budget in (2000, 4000):
        for summary in summaries(samples / "agent_session.jsonl", budget):
            assert fragments(summary) == []
            assert "- user: .from_dict" not in summary


def test_under_a_small_budget_the_findings_outrank_an_old_tool_output(realdata: Path) -> None:
    """Issue 29.10: at 2,000 tokens on the cctrace session the room went to a middle-cut
    `head -80 RENDERED.md` output of an earlier turn while the summary kept the requests alone and
    lost the session's key finding: Claude Code names a project's folder with hyphens where the
    path has underscores (`-mnt-c-python-cctrace-test`, not `-mnt-c-python-cctrace_test`)."""
    path = realdata / SESSIONS["claude-code"]
    result = invoke(str(path), "--max-tokens", "2000", "--to", "openai")
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    summary = next(m["content"] for m in out if str(m.get("content")).startswith("CUCA summary:"))
    body = summary.split("</summary>")[0]
    assert "-mnt-c-python-cctrace-test" in body and "hyphen" in body
    current = max(i for i, m in enumerate(out) if m["role"] == "user")
    older_results = [m for m in out[:current] if m["role"] == "tool"]
    assert not any("head -80" in str(m.get("tool_calls")) for m in out[:current])
    assert sum(len(str(m["content"])) for m in older_results) < 1000


def test_a_tool_output_line_the_session_went_back_to_is_quoted_with_its_source() -> None:
    """Issue 28, sub-message selection: of an old tool result, the line the agent went back to later
    (here the signature of `migrate_checkpoint`) is carried into the summary with where it came
    from (the tool, the path, the line number), not the lines nobody named again."""
    from core.counting.counter import MessageCounter
    from core.summarizers.base import SummaryRequest
    from core.summarizers.extractive import ExtractiveSummarizer
    from tests.helpers import assistant_calls, call, msg, result, shared_counter

    listing = "\n".join(f"{n:6}→{text}" for n, text in enumerate(
        ["import json", "", "def load_rows(path):", "    return json.loads(path.read_text())", "",
         "def migrate_checkpoint(checkpoint_id: CheckpointID, store: Store) -> None:",
         "    rows = load_rows(store.path)"], start=1))
    span = [msg("user", "Look at the checkpoint code."),
            assistant_calls(call("r1", "Read", file_path="src/checkpoints.py")), result("r1", listing),
            msg("assistant", "I have read it."), msg("user", "Now add a dry-run flag.")]
    for i in range(3):
        span += [msg("assistant", f"Step {i}: calling `migrate_checkpoint` with a `CheckpointID` from the test."),
                 assistant_calls(call(f"t{i}", "Bash", command=f"pytest tests/test_step_{i}.py")), result(f"t{i}", "1 passed")]
    counter = MessageCounter(shared_counter()[0])
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(span), 1, 2, max_tokens=800), counter).text
    assert ("- Read(src/checkpoints.py) output, line 6: def migrate_checkpoint(checkpoint_id: CheckpointID, "
            "store: Store) -> None:") in text
    assert "line 3: def load_rows" not in text  # nobody named it again



@pytest.mark.parametrize("name", ["48_415fae24d7_0_full.jsonl", "a0_9495d15235_0_full.jsonl"])
def test_a_skill_claude_code_loads_is_not_a_request_of_the_user(name: str, realdata: Path) -> None:
    """Claude Code puts a skill's instructions into the conversation as user text ("Base directory
    for this skill: …"): the summary quoted pages of them as what the user asked."""
    found = summaries(realdata / "claude-code-compactions" / name, 3000)
    assert found and not any("Base directory for this skill" in summary for summary in found), found


def test_a_hook_that_stopped_an_operation_is_not_a_request_of_the_user(realdata: Path, tmp_path: Path) -> None:
    """Claude Code puts a hook's refusal into the conversation as user text ("Operation stopped by
    hook: Another session is active …"): the summary quoted it as what the user asked."""
    lines = (realdata / "claude-code-compactions" / "5e_5207b424e2_0_full.jsonl").read_text().splitlines()
    boundary = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_text("\n".join(lines[:boundary]) + "\n")  # what Claude Code compacted there
    found = summaries(prefix, 2200)
    asked = [line for summary in found for line in summary.splitlines() if line.startswith("- user asked")]
    assert asked and not any("Operation stopped by hook" in line for line in asked), asked


def test_a_bold_numbered_point_keeps_its_number_with_its_words() -> None:
    """An assistant's numbered point in bold ("**2. The cache** is stale …") was split after its
    number: the summary quoted "2." as a statement and the sentence without its point."""
    from core.counting.counter import MessageCounter
    from core.summarizers.base import SummaryRequest
    from core.summarizers.extractive import ExtractiveSummarizer
    from tests.helpers import msg, shared_counter

    span = [msg("user", "Why does the build fail after a rebase?"),
            msg("assistant", "Two causes.\n\n**2. The cache** is stale after a rebase, so we clear `build/cache` first."),
            msg("user", "Then clear it.")]
    counter = MessageCounter(shared_counter()[0])
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(span), 1, 2, max_tokens=600), counter).text
    assert "- assistant: 2. The cache is stale after a rebase" in text, text
    assert "- assistant: 2.\n" not in text


def test_a_go_method_a_change_adds_is_named_in_the_summary() -> None:
    """A Go method (`func (s *GitStore) GetSessionLog(…)`) is a definition like a function: the line
    for the change that adds it names it."""
    from core.counting.counter import MessageCounter
    from core.summarizers.base import SummaryRequest
    from core.summarizers.extractive import ExtractiveSummarizer
    from tests.helpers import assistant_calls, call, msg, result, shared_counter

    added = ("func (s *GitStore) GetSessionLog(cpID id.CheckpointID) ([]byte, string, error) {\n"
             "\treturn s.read(cpID)\n}\n\nfunc LookupSessionLog(cpID id.CheckpointID) ([]byte, string, error) {\n}\n")
    span = [msg("user", "Move GetSessionLog into the checkpoint package."),
            assistant_calls(call("e1", "Edit", file_path="checkpoint/committed.go", old_string="// end",
                                 new_string=added)),
            result("e1", "The file checkpoint/committed.go has been updated successfully."),
            msg("user", "Now update the callers.")]
    counter = MessageCounter(shared_counter()[0])
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(span), 1, 2, max_tokens=600), counter).text
    assert "- changed checkpoint/committed.go: defines GetSessionLog, LookupSessionLog" in text, text


def test_an_edit_the_next_turns_build_on_is_quoted_by_the_lines_it_adds() -> None:
    """An edit that defines nothing new but adds a call the rest of the span names again is quoted by
    that added line, with the file it changed; an edit nobody came back to gets no line of its own."""
    from core.counting.counter import MessageCounter
    from core.summarizers.base import SummaryRequest
    from core.summarizers.extractive import ExtractiveSummarizer
    from tests.helpers import assistant_calls, call, msg, result, shared_counter

    span = [msg("user", "Read the transcript through the checkpoint store."),
            assistant_calls(call("e1", "Edit", file_path="cli/rewind.go", old_string="content, err := readLocal(path)",
                                 new_string="content, sessionID, err := checkpoint.LookupSessionLog(cpID)")),
            result("e1", "The file cli/rewind.go has been updated successfully."),
            assistant_calls(call("e2", "Edit", file_path="cli/other.go", old_string="x := 1", new_string="x := config.DefaultWidth")),
            result("e2", "The file cli/other.go has been updated successfully.")]
    for i in range(2):
        span += [msg("assistant", f"Step {i}: `checkpoint.LookupSessionLog` returns the session ID too."),
                 assistant_calls(call(f"t{i}", "Bash", command=f"go test ./cli/... -run TestRewind{i}")), result(f"t{i}", "ok")]
    counter = MessageCounter(shared_counter()[0])
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(span), 1, 2, max_tokens=800), counter).text
    assert "- changed cli/rewind.go: adds `content, sessionID, err := checkpoint.LookupSessionLog(cpID)`" in text, text
    assert "config.DefaultWidth" not in text


def test_a_line_shortened_to_fit_never_ends_inside_a_name() -> None:
    """A long statement is shortened where a word ends: cut at its character limit it ended in
    `textutil.StripIDEContextTag…`, half a name a model cannot look up (the real session went on
    to call `textutil.StripIDEContextTags()`). A name that ends soon after the limit is finished;
    a long one (a URL) is left out whole."""
    from core.messages import one_line

    said = ("Issues to Fix: Claude Code ignores startOffset - Token usage calculates from entire transcript "
            "instead of just checkpoint portion; Gemini prompts missing IDE context tag stripping - Lost the "
            "`textutil.StripIDEContextTags()` call that the Claude Code path has")
    shortened = one_line(said, 220)
    assert shortened.endswith("`textutil.StripIDEContextTags()`…"), shortened
    url = "see https://github.com/entireio/cli/pull/112/files#diff-0123456789abcdef0123456789abcdef for it"
    cut = one_line(url, 30)
    assert cut == "see…", cut
    assert one_line("short enough", 30) == "short enough"
    assert one_line("one two three four", 9) == "one two…"


def test_a_read_of_a_file_the_span_later_wrote_whole_does_not_describe_it() -> None:
    """A file read and then written whole again: what the read found is no longer there. The
    summary said `read src/lib.rs: defines add, tests, it_works` of cargo's template after the agent
    had replaced it, a false description of the file the next turns work on."""
    from core.counting.counter import MessageCounter
    from core.summarizers.base import SummaryRequest
    from core.summarizers.extractive import ExtractiveSummarizer
    from tests.helpers import assistant_calls, call, msg, result, shared_counter

    template = ("pub fn add(left: u64, right: u64) -> u64 {\n    left + right\n}\n\n#[cfg(test)]\nmod tests {\n"
                "    use super::*;\n\n    #[test]\n    fn it_works() {\n        assert_eq!(add(2, 2), 4);\n    }\n}\n")
    written = "pub struct Parser {\n    pos: usize,\n}\n\npub fn parse(text: &str) -> Parser {\n    Parser { pos: 0 }\n}\n"
    span = [msg("user", "Port the parser to Rust."),
            assistant_calls(call("r1", "Read", file_path="src/lib.rs")), result("r1", template),
            assistant_calls(call("w1", "Write", file_path="src/lib.rs", content=written)),
            result("w1", "File created successfully at: src/lib.rs"),
            assistant_calls(call("r2", "Read", file_path="src/main.rs")),
            result("r2", "fn main() {\n    println!(\"Hello, world!\");\n}\n"),
            msg("user", "Now add the tokenizer."),
            msg("assistant", "The template's `assert_eq!(add(2, 2), 4)` check went with it."),
            msg("assistant", "Nothing calls `add` or `assert_eq!(add(2, 2), 4)` any more.")]
    counter = MessageCounter(shared_counter()[0])
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(span), 1, 2, max_tokens=600), counter).text
    assert "- changed src/lib.rs: defines Parser, parse" in text, text
    assert "it_works" not in text and "defines add" not in text, text
    assert "Read(src/lib.rs) output" not in text, text  # nor a line quoted from what was replaced
    assert "- read src/main.rs (3 lines): defines main" in text, text


def test_a_terminal_paste_is_what_the_user_showed_not_a_request() -> None:
    """ "user asked (turn 10): (llm) jim@DESKTOP-8QDMK8N:/mnt/c/python/cctrace_test$ claude -c No
    conversation found to continue" was the user pasting what their terminal printed: the summary
    says they showed it."""
    from core.counting.counter import MessageCounter
    from core.summarizers.base import SummaryRequest
    from core.summarizers.extractive import ExtractiveSummarizer
    from tests.helpers import msg, shared_counter

    paste = ("(llm) jim@DESKTOP-8QDMK8N:/mnt/c/python/cctrace_test$ claude --dangerously-skip-permissions -c\n"
             "No conversation found to continue")
    span = [msg("user", "Make claude -c find the moved session."), msg("assistant", "Renamed the project folder."),
            msg("user", paste), msg("assistant", "The folder name must use hyphens."),
            msg("user", "$ pytest -q\n3 failed, 10 passed")]
    counter = MessageCounter(shared_counter()[0])
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(span), 1, 3, max_tokens=600), counter).text
    assert "- user asked (turn 1): Make claude -c find the moved session." in text, text
    assert "- user pasted (turn 2): (llm) jim@DESKTOP-8QDMK8N:/mnt/c/python/cctrace_test$ claude" in text, text
    assert "- user pasted (turn 3): $ pytest -q 3 failed, 10 passed" in text, text
