"""The Ray engine (core.batch.ray_engine) on a local Ray instance: the same bytes as the process pool."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install '.[ray]'")
pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install '.[ray]'")

from core.batch.ray_engine import run_ray
from core.batch.runner import COMPACTED, FAILED, UP_TO_DATE, plan_batch
from core.config import MemoryConfig
from tests.helpers import invoke
from tests.test_batch import BUDGET, make_tree, run_batch


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def without_timing(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("seconds", "output")}


def test_run_ray_starts_a_local_instance_and_stops_it(tmp_path: Path, samples: Path) -> None:
    tree = make_tree(tmp_path, samples)
    tasks = plan_batch([str(tree / "a")], str(tmp_path / "out"), MemoryConfig().with_overrides(max_tokens=3000))
    assert not ray.is_initialized()
    rows = run_ray(tasks, jobs=2)
    assert not ray.is_initialized(), "the instance the run started is stopped"
    assert sorted(r.status for r in rows) == [COMPACTED, COMPACTED]


def test_an_unreachable_cluster_is_bad_usage(tmp_path: Path, samples: Path) -> None:
    if ray.is_initialized():
        pytest.skip("a Ray instance is running in this process")
    tree = make_tree(tmp_path, samples)
    result = invoke("batch", str(tree / "a"), "--out", str(tmp_path / "out"), "--engine", "ray",
                    "--ray-address", "127.0.0.1:1")
    assert result.exit_code == 2
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in result.stderr


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One local Ray instance for the tests below, started and stopped here."""
    cache = tmp_path_factory.mktemp("ray-cache")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": {"COMPACT_CACHE_DIR": str(cache), "NO_COLOR": "1"}})
    try:
        yield
    finally:
        ray.shutdown()


def test_the_pool_and_ray_give_byte_identical_outputs(local_ray: None, tmp_path: Path, samples: Path) -> None:
    tree = make_tree(tmp_path, samples)
    pool_out, ray_out = tmp_path / "pool", tmp_path / "ray"
    pool, pool_report = run_batch(str(tree), "--out", str(pool_out), *BUDGET, "--jobs", "2", "-q",
                                  "--report", str(tmp_path / "pool.json"))
    on_ray, ray_report = run_batch(str(tree), "--out", str(ray_out), *BUDGET, "--engine", "ray", "--jobs", "2",
                                   "-q", "--report", str(tmp_path / "ray.json"))
    assert pool.exit_code == on_ray.exit_code == 1
    pool_files, ray_files = files(pool_out), files(ray_out)
    assert sorted(pool_files) == sorted(ray_files)
    for name, data in pool_files.items():
        if name.endswith(".compact.json"):  # the sidecars differ only in the time each run took
            left, right = json.loads(data), json.loads(ray_files[name])
            left["row"], right["row"] = without_timing(left["row"]), without_timing(right["row"])
            assert left == right, name
        else:
            assert data == ray_files[name], f"{name} differs between the pool and Ray"
    assert pool_report is not None and ray_report is not None
    assert [without_timing(r) for r in pool_report["rows"]] == [without_timing(r) for r in ray_report["rows"]]
    assert ray_report["engine"] == "ray"
    assert {k: v for k, v in pool_report["totals"].items() if k != "seconds"} == {
        k: v for k, v in ray_report["totals"].items() if k != "seconds"}


def test_ray_resumes_a_pool_run_and_stops_at_the_first_failure(local_ray: None, tmp_path: Path, samples: Path) -> None:
    tree = make_tree(tmp_path, samples)
    out = tmp_path / "out"
    run_batch(str(tree), "--out", str(out), *BUDGET, "-q")
    result, report = run_batch(str(tree), "--out", str(out), *BUDGET, "--engine", "ray", "-q", "--report", "-")
    assert result.exit_code == 1
    assert report is not None
    assert sorted(r["status"] for r in report["rows"]) == [FAILED, UP_TO_DATE, UP_TO_DATE, UP_TO_DATE]

    bad = tree / "broken" / "bad.jsonl"
    bad.write_text(json.dumps({"role": "user", "content": "x" * 2_000_000}) + "\n{broken\n")
    result, report = run_batch(str(tree), "--out", str(tmp_path / "fresh"), *BUDGET, "--engine", "ray", "--jobs", "1",
                               "--fail-fast", "-q", "--report", "-")
    assert result.exit_code == 1
    assert report is not None
    assert report["rows"][0]["status"] == FAILED
    assert report["totals"]["failed"] == 1 and report["totals"]["not_run"] == 4 - len(report["rows"])
