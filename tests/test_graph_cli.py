"""`compact graph ...` in process: exit codes, every output format, reports and outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from cli.app import app
from core.graph.checkers import REPORT_SCHEMA
from core.io.schema_loader import load_schema

SAMPLES = Path(__file__).parent.parent / "sample_transcripts" / "graph"
FIXTURES = Path(__file__).parent / "fixtures" / "graph"

INVALID_LINES = [
    "invalid.json: $.nodes[1].lables: unknown field 'lables' (did you mean \"labels\"?)",
    ("invalid.json: $.nodes[2].id: duplicate node id 'alice', first at $.nodes[0] "
    "(give each node its own id, or merge the two into one)"),
    "invalid.json: $.relationships[0].weight: non-finite weight NaN (use a finite number; JSON has no NaN or Infinity)",
    "invalid.json: $.relationships[1].to: to 'vualt' is not a node id (add a node with this id, or correct the id)",
    ("invalid.json: $.relationships[2].id: duplicate relationship id 'r2', first at $.relationships[1] "
    "(give each relationship its own id)"),
    ("invalid.json: $.relationships[2].weight: non-finite weight Infinity "
    "(use a finite number; JSON has no NaN or Infinity)"),
    "invalid.json: $.relationships[3].type: empty string (use a non-empty string)",
    "invalid.json: $.relationships[3].weight: expected a number, found a string (use a number)",
]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the samples and fixtures, as the current directory (short paths in output)."""
    for source in (*SAMPLES.glob("*.json"), *FIXTURES.glob("*.json")):
        shutil.copy(source, tmp_path / source.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["graph", *args])


def valid_report(data: dict[str, Any]) -> dict[str, Any]:
    assert [
        e.message for e in Draft202012Validator(load_schema(REPORT_SCHEMA)).iter_errors(data)
    ] == []
    return data


# -- validate ---------------------------------------------------------------------------------


def test_validate_valid_files_exit_0(work: Path) -> None:
    result = run("validate", "valid.json", "delta.json")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "compact: 2 snapshots valid, 0 warnings\n"


def test_validate_text_lists_every_problem_and_exits_1(work: Path) -> None:
    result = run("validate", "valid.json", "invalid.json")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == INVALID_LINES
    assert result.stderr == (
        "compact: error: 1 of 2 snapshots failed validation: 8 problems, 0 warnings "
        "(`compact graph validate --help` lists the rules)\n"
    )


def test_validate_malformed_json_is_one_line_with_line_and_column(work: Path) -> None:
    result = run("validate", "malformed-trailing-comma.json")
    assert result.exit_code == 1
    assert result.stdout == (
        "malformed-trailing-comma.json:4:3: malformed JSON: Expecting value "
        "(fix the JSON syntax there; a snapshot is one JSON object)\n"
    )


def test_validate_warnings_are_listed_but_pass_unless_strict(work: Path) -> None:
    result = run("validate", "warnings.json")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "warnings.json: $.nodes[0].labels[1]: warning: label 'X' repeated (list each label once; it is written once)",
        "warnings.json: $.nodes[2]: warning: node 'lonely' has no relationships (allowed; it is kept, and ranked lightest)",
        ("warnings.json: $.relationships[1]: warning: same from, to and type as $.relationships[0] "
        "(allowed; merge them into one relationship if they say the same thing)"),
        ("warnings.json: $.relationships[2]: warning: self-loop on node 'b' "
        "(allowed; check that from and to are meant to be the same node)"),
    ]
    assert result.stderr == "compact: 1 snapshot valid, 4 warnings\n"
    assert run("validate", "--no-warnings", "warnings.json").stdout == ""
    strict = run("validate", "--strict", "warnings.json")
    assert strict.exit_code == 1
    assert "1 of 1 snapshot failed validation: 0 problems, 4 warnings" in strict.stderr


def test_validate_github_annotations(work: Path) -> None:
    result = run(
        "validate",
        "--format",
        "github",
        "invalid.json",
        "warnings.json",
        "malformed-trailing-comma.json",
    )
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "::error file=invalid.json,line=4,col=21,title=compact graph schema::"
        "$.nodes[1].lables: unknown field 'lables' (did you mean \"labels\"?)"
    )
    assert lines[8] == (
        "::warning file=warnings.json,line=1,col=40,title=compact graph duplicate-label::"
        "$.nodes[0].labels[1]: label 'X' repeated (list each label once; it is written once)"
    )
    assert lines[-1] == (
        "::error file=malformed-trailing-comma.json,line=4,col=3,title=compact graph malformed-json::"
        "line 4, column 3: malformed JSON: Expecting value (fix the JSON syntax there; a snapshot is one JSON object)"
    )
    assert len(lines) == 8 + 4 + 1


def test_validate_github_escapes_annotation_text(work: Path) -> None:
    (work / "odd, name.json").write_text(
        '{"nodes": [{"id": "a%\\nb"}, {"id": "a%\\nb"}], "relationships": []}'
    )
    result = run("validate", "-f", "github", "--no-warnings", "odd, name.json")
    assert result.stdout == (
        "::error file=odd%2C name.json,line=1,col=30,title=compact graph duplicate-node-id::"
        "$.nodes[1].id: duplicate node id 'a%25\\nb', first at $.nodes[0] "
        "(give each node its own id, or merge the two into one)\n"
    )


def test_validate_json_document(work: Path) -> None:
    result = run("validate", "--format", "json", "valid.json", "invalid.json")
    assert result.exit_code == 1
    data = valid_report(orjson.loads(result.stdout))
    assert list(data) == ["kind", "version", "valid", "strict", "files"]
    assert data["valid"] is False
    assert [f["file"] for f in data["files"]] == ["valid.json", "invalid.json"]
    assert data["files"][0]["counts"] == {"nodes": 4, "relationships": 3}
    assert [p["path"] for p in data["files"][1]["problems"]][:2] == [
        "$.nodes[1].lables",
        "$.nodes[2].id",
    ]
    assert data["files"][1]["problems"][2]["pointer"] == "/relationships/0/weight"
    ok = run("validate", "-f", "json", "valid.json")
    assert ok.exit_code == 0 and valid_report(orjson.loads(ok.stdout))["valid"] is True


def test_validate_bad_usage_exits_2(work: Path) -> None:
    assert run("validate", "missing.json").exit_code == 2
    assert run("validate", "--format", "xml", "valid.json").exit_code == 2
    assert run("validate").exit_code == 2


# -- merge ------------------------------------------------------------------------------------


def test_merge_to_stdout_with_a_summary_on_stderr(work: Path) -> None:
    result = run("merge", "valid.json", "delta.json", "--policy", "merge", "--weights", "sum")
    assert result.exit_code == 0
    merged = orjson.loads(result.stdout)
    assert [n["id"] for n in merged["nodes"]] == ["alice", "vault", "key", "ops", "bob"]
    assert merged["relationships"][0]["weight"] == 3
    assert result.stderr == (
        "compact: merged: nodes 1 added, 1 updated, 1 unchanged; relationships 1 added, 1 updated, 0 unchanged; "
        "2 conflicts (merge, weights sum); graph now 5 nodes, 4 relationships\n"
    )


def test_merge_to_a_file_with_a_report(work: Path) -> None:
    result = run(
        "merge",
        "valid.json",
        "delta.json",
        "--policy",
        "prefer_incoming",
        "-o",
        "out.json",
        "--report",
        "report.json",
    )
    assert result.exit_code == 0
    assert result.stdout == "" and result.stderr == ""
    report = valid_report(orjson.loads((work / "report.json").read_bytes()))
    assert report["policy"] == {"conflict": "prefer_incoming", "weights": "incoming"}
    assert run("validate", "out.json").exit_code == 0
    stdout_report = run("merge", "valid.json", "delta.json", "-o", "out2.json", "--report", "-")
    assert valid_report(orjson.loads(stdout_report.stdout))["kind"] == "graph-merge"


def test_merge_in_place_over_the_base(work: Path) -> None:
    result = run("merge", "valid.json", "delta.json", "-o", "valid.json")
    assert result.exit_code == 0
    assert len(orjson.loads((work / "valid.json").read_bytes())["nodes"]) == 5


def test_an_integer_past_64_bits_survives_a_merge_exactly(work: Path) -> None:
    # orjson reads 2**70 as a float: 1180591620717411303424 would come back as 1.1805916207174113e+21.
    base = json.loads((work / "valid.json").read_text())
    base["nodes"][0]["properties"].update(big=2**70, small=-(2**65))
    (work / "big.json").write_text(json.dumps(base))
    assert run("merge", "big.json", "delta.json", "-o", "merged.json").exit_code == 0
    merged = json.loads((work / "merged.json").read_text())
    properties = next(n["properties"] for n in merged["nodes"] if n["id"] == base["nodes"][0]["id"])
    assert properties["big"] == 2**70 and properties["small"] == -(2**65)
    assert type(properties["big"]) is int


def test_an_integer_past_a_double_is_read_exactly_and_as_a_weight_is_non_finite(work: Path) -> None:
    # 10**400 is valid JSON; orjson refuses it ("number is infinity when parsed as double"), and it was
    # reported as malformed JSON, where the standard library reads it exactly.
    base = json.loads((work / "valid.json").read_text())
    base["nodes"][0]["properties"]["huge"] = 10**400
    (work / "huge.json").write_text(json.dumps(base))
    assert run("validate", "huge.json").exit_code == 0
    assert run("merge", "huge.json", "delta.json", "-o", "merged.json").exit_code == 0
    merged = json.loads((work / "merged.json").read_text())
    assert next(n["properties"] for n in merged["nodes"] if n["id"] == base["nodes"][0]["id"])["huge"] == 10**400
    base["relationships"][0]["weight"] = -(10**400)  # beyond a double: non-finite, like 1e999
    (work / "heavy.json").write_text(json.dumps(base))
    checked = run("validate", "heavy.json")
    assert checked.exit_code == 1
    assert checked.stdout == ("heavy.json: $.relationships[0].weight: non-finite weight -1000000000000000000… "
                              "(401 digits) (use a finite number; JSON has no NaN or Infinity)\n")
    refused = run("merge", "valid.json", "heavy.json", "-o", "out.json")
    assert refused.exit_code == 2 and "non-finite weight" in refused.stderr and not (work / "out.json").exists()


def test_a_weight_past_a_double_beside_a_nan_weight_is_named_not_a_traceback(work: Path) -> None:
    # A snapshot holding both a NaN (or Infinity) and an integer past a double as weights: each is a
    # non-finite weight named by its path, in whichever order they come, never an OverflowError.
    base = json.loads((work / "valid.json").read_text())
    assert len(base["relationships"]) >= 2
    text = json.dumps(base)
    for first, second in (("NaN", "-" + "1" * 401), ("1" * 401, "Infinity")):
        rels = json.loads(text)["relationships"]
        rels[0]["weight"], rels[1]["weight"] = "@FIRST@", "@SECOND@"
        doc = {**json.loads(text), "relationships": rels}
        (work / "both.json").write_text(json.dumps(doc).replace('"@FIRST@"', first).replace('"@SECOND@"', second))
        checked = run("validate", "both.json")
        assert checked.exit_code == 1, checked.output
        lines = checked.stdout.splitlines()
        assert [line.split(": ")[1] for line in lines] == ["$.relationships[0].weight", "$.relationships[1].weight"]
        assert all("non-finite weight" in line for line in lines)
        refused = run("merge", "valid.json", "both.json", "-o", "out.json")
        assert refused.exit_code == 2 and "non-finite weight" in refused.stderr and not (work / "out.json").exists()


def test_merge_refusals_exit_2_and_write_nothing(work: Path) -> None:
    before = (work / "valid.json").read_bytes()
    invalid = run("merge", "valid.json", "invalid.json", "-o", "out.json")
    assert invalid.exit_code == 2
    assert invalid.stderr.startswith(
        "compact: error: invalid.json: $.nodes[1].lables: unknown field 'lables' "
        "(and 7 more problems)"
    )
    capped = run("merge", "valid.json", "delta.json", "--max-nodes", "4", "-o", "valid.json")
    assert capped.exit_code == 2
    assert capped.stderr == (
        "compact: error: delta.json: merge refused: the graph would hold 5 nodes (cap 4); nothing was changed "
        "(raise --max-nodes, or pass --evict lightest to drop the lightest nodes)\n"
    )
    assert (work / "valid.json").read_bytes() == before
    assert not (work / "out.json").exists()
    silly = run(
        "merge", "valid.json", "delta.json", "--policy", "keep_existing", "--weights", "sum"
    )
    assert silly.exit_code == 2 and "has no effect with policy keep_existing" in silly.stderr
    both_stdout = run("merge", "valid.json", "delta.json", "--report", "-")
    assert both_stdout.exit_code == 2 and "--report - needs -o" in both_stdout.stderr
    assert run("merge", "valid.json", "delta.json", "--policy", "newest").exit_code == 2


def test_merge_with_eviction(work: Path) -> None:
    result = run(
        "merge",
        "valid.json",
        "delta.json",
        "--max-nodes",
        "4",
        "--evict",
        "lightest",
        "-o",
        "out.json",
        "--report",
        "report.json",
    )
    assert result.exit_code == 0
    report = valid_report(orjson.loads((work / "report.json").read_bytes()))
    # merged weights (r1 takes the incoming 1): alice 2, vault 3, key 1.5, ops 1, bob 0.5 -> bob goes
    assert report["evicted"]["nodes"] == [{"id": "bob", "weight": 0.5, "relationships": ["r4"]}]
    assert len(orjson.loads((work / "out.json").read_bytes())["nodes"]) == 4


# -- import -----------------------------------------------------------------------------------


def test_import_normalises_and_reports(work: Path) -> None:
    result = run("import", "warnings.json")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[2] == '    {"id":"a","labels":["X"],"properties":{}},'
    assert result.stderr == (
        "compact: imported: 3 nodes (1 labels), 3 relationships (2 types), total weight 4; "
        "replaced 0 nodes, 0 relationships; 4 warnings\n"
    )
    with_report = run("import", "valid.json", "-o", "norm.json", "--report", "-")
    data = valid_report(orjson.loads(with_report.stdout))
    assert data["kind"] == "graph-import" and data["after"] == {"nodes": 4, "relationships": 3}


def test_import_of_an_invalid_snapshot_exits_2(work: Path) -> None:
    result = run("import", "nan-weight.json", "-o", "out.json")
    assert result.exit_code == 2
    assert result.stderr == (
        "compact: error: nan-weight.json: $.relationships[0].weight: non-finite weight NaN "
        "(use a finite number; JSON has no NaN or Infinity)\n"
    )
    assert not (work / "out.json").exists()


# -- render -----------------------------------------------------------------------------------


def test_render_prints_the_message(work: Path) -> None:
    result = run("render", "valid.json", "--max-nodes", "2", "--max-relationships", "1")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "CUCA graph memory: 4 nodes, 3 relationships.",
        "Nodes:",
        '- vault [Place] {"city":"Lisbon"}',
        '- alice [Person] {"email":"ops@example.com"}',
        "Relationships:",
        '- alice -OWNS-> vault (weight 2) {"since":2020}',
        ("Left out: 2 nodes and 2 relationships over the limits (max_nodes 2, max_relationships 1; "
        "lightest left out first)."),
    ]


def test_render_with_focus(work: Path) -> None:
    result = run(
        "render",
        "valid.json",
        "--focus",
        "key",
        "--focus",
        "ops",
        "--direction",
        "out",
        "--depth",
        "1",
    )
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1] == "Focus: key, ops (direction out, depth 1)."
    unknown = run("render", "valid.json", "--focus", "alise")
    assert unknown.exit_code == 2
    assert (
        unknown.stderr
        == "compact: error: focus node 'alise' is not in the graph (did you mean 'alice'?)\n"
    )


def test_render_an_empty_graph_prints_nothing(work: Path) -> None:
    result = run("render", "empty.json")
    assert result.exit_code == 0 and result.stdout == ""
    assert "the graph is empty" in result.stderr


# -- help -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["validate", "merge", "import", "render"])
def test_every_command_has_help_and_is_documented(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0 and "Usage:" in result.stdout
    readme = (Path(__file__).parent.parent / "docs" / "graph.md").read_text(encoding="utf-8")
    assert f"compact graph {command}" in readme
    for option in [
        word for word in result.stdout.split() if word.startswith("--") and word != "--help"
    ]:
        assert option.split("/")[0].rstrip(",:;.)") in readme, option


# -- the installed script ---------------------------------------------------------------------


@pytest.mark.script_launch_mode("subprocess")
def test_installed_compact_graph_validate(script_runner: Any, work: Path) -> None:
    result = script_runner.run(["compact", "graph", "validate", "valid.json", "invalid.json"])
    assert result.returncode == 1
    assert result.stdout.splitlines() == INVALID_LINES
    assert result.stderr.startswith("compact: error: 1 of 2 snapshots failed validation")
    github = script_runner.run(["compact", "graph", "validate", "--format", "github", "valid.json"])
    assert (github.returncode, github.stdout) == (0, "")


def test_starting_the_cli_loads_no_graph_code_but_its_options() -> None:
    import subprocess
    import sys

    code = "import sys, cli.app; print(sorted(m for m in sys.modules if m.startswith('core.graph')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "['core.graph', 'core.graph.options']"


def test_cli_defaults_match_the_library() -> None:
    from cli import graph as cli_graph
    from core.graph import DEFAULT_MARKER, GraphCaps

    assert cli_graph.DEFAULT_MARKER == DEFAULT_MARKER
    help_text = " ".join(run("merge", "--help").stdout.split())
    assert f"[default: {GraphCaps().max_nodes}]" in help_text
    assert f"[default: {GraphCaps().max_relationships}]" in help_text


def test_pre_commit_hook_runs_graph_validate_on_snapshot_files() -> None:
    import re

    text = (Path(__file__).parent.parent / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert "- id: compact-graph-validate" in text
    assert "entry: compact graph validate\n" in text
    files = re.search(r"^  files: '(.*)'$", text, re.MULTILINE)
    assert files is not None
    pattern = re.compile(files.group(1))
    assert pattern.search("memory/session.graph.json") and pattern.search("graph/alice.json")
    assert not pattern.search("package.json")


def test_the_pre_commit_hook_file_parses_and_its_entry_is_a_real_command(work: Path) -> None:
    import re
    import tomllib

    yaml = pytest.importorskip("yaml")
    root = Path(__file__).parent.parent
    hooks = yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert isinstance(hooks, list) and [hook["id"] for hook in hooks] == ["compact-graph-validate"]
    hook = hooks[0]
    assert {"id", "name", "entry", "language"} <= hook.keys()
    # The entry's program is the console script the package installs, and the rest is a command of it.
    program, *command = hook["entry"].split()
    scripts = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert program in scripts
    assert command[0] == "graph"
    assert run(*command[1:], "--help").exit_code == 0
    # pre-commit appends the staged file names: the entry passes a valid one and fails an invalid one.
    assert run(*command[1:], "valid.json").exit_code == 0
    assert run(*command[1:], "valid.json", "invalid.json").exit_code == 1
    # The local hook the docs show runs the same entry on the same files.
    readme = (root / "docs" / "graph.md").read_text(encoding="utf-8")
    snippet = re.search(r"```yaml\n(repos:\n.*?)```", readme, re.DOTALL)
    assert snippet is not None
    local = yaml.safe_load(snippet.group(1))["repos"][0]["hooks"][0]
    assert (local["id"], local["entry"], local["files"]) == (hook["id"], hook["entry"], hook["files"])



def test_a_5000_digit_integer_is_one_line_not_a_traceback(work: Path) -> None:
    """Python refuses to read integers of more than 4,300 digits: validate said so with a traceback."""
    (work / "huge.json").write_text('{"nodes": [{"id": "a", "labels": ["X"], "properties": {"n": ' + "9" * 5000
                                    + '}}], "relationships": []}')
    result = run("validate", "huge.json")
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout.startswith("huge.json:") and "malformed JSON" in result.stdout
    assert len(result.stdout.splitlines()) == 1


def test_merge_dash_o_dash_writes_the_snapshot_on_stdout_as_compact_run_does(work: Path) -> None:
    """`-o -` wrote a file named `-` in the current folder."""
    to_stdout = run("merge", "valid.json", "delta.json")
    result = run("merge", "valid.json", "delta.json", "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout == to_stdout.stdout and orjson.loads(result.stdout)["nodes"]
    assert not (work / "-").exists()
    both = run("merge", "valid.json", "delta.json", "-o", "-", "--report", "-")
    assert both.exit_code == 2 and "--report - needs -o" in both.stderr, both.output
    assert not (work / "-").exists()
