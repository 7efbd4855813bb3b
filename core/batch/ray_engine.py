"""The Ray engine: the batch's ``compact_one``, mapped over a Ray Data dataset of tasks.

Install it with ``pip install '.[ray]'`` in a checkout. A Ray Data dataset
holds one row per task (the task as JSON bytes), in a few blocks per CPU;
``map_batches`` runs :func:`compact_batch` on the workers, which calls
:func:`core.batch.runner.compact_one` for each task — the very function the process
pool runs, so the outputs are byte for byte the same. Each worker reads its input and writes its output and
sidecar itself, so on a cluster every node must see the inputs and ``--out`` at
the same paths (a shared filesystem); only the small report rows come back to
the driver, as they finish, in any order.

Without an address a local Ray instance is started for the run (``jobs`` CPUs,
no dashboard, usage reporting off) and stopped at the end; with one (``auto``, ``HOST:6379`` or
``ray://HOST:10001``) the run joins that cluster and leaves it running.
"""

from __future__ import annotations

import logging
import os
import socket
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from core.batch.runner import FAILED, BatchRow, BatchTask, OnRow, compact_one
from core.errors import ConfigError

# A few blocks per CPU: one Ray task per input would cost more in scheduling than the pool's whole run.
BLOCKS_PER_CPU = 4
# What the run changes in Ray Data's context (and puts back after): no progress bars of its own (the
# CLI draws one), no stats in the log, and tiny output blocks, so that each row comes back to the
# driver as soon as its input is done instead of when its whole block is.
_CONTEXT = {"enable_progress_bars": False, "enable_auto_log_stats": False, "target_max_block_size": 1024}
PROBE_SECONDS = 5.0
CLUSTER_FIX = "check --ray-address (auto, HOST:6379 or ray://HOST:10001) and that the cluster is up"
INSTALL_FIX = "install Ray Data: pip install 'ray[data]>=2.10' (the [ray] extra)"


def compact_batch(batch: dict[str, Any]) -> dict[str, list[bytes]]:
    """Ray Data UDF: a batch of tasks (JSON bytes) -> their report rows (JSON bytes)."""
    rows = []
    for payload in batch["task"]:
        task = BatchTask.from_dict(orjson.loads(bytes(payload)))
        rows.append(orjson.dumps(compact_one(task).to_dict()))
    return {"row": rows}


def run_ray(
    tasks: Sequence[BatchTask],
    *,
    address: str | None = None,
    jobs: int | None = None,
    fail_fast: bool = False,
    on_row: OnRow | None = None,
) -> list[BatchRow]:
    """Run every task on Ray; the rows in the order they finished (``fail_fast``: stop at the first failure)."""
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        _init(ray, address, jobs)
    rows: list[BatchRow] = []
    try:
        for row in _rows(ray, tasks, jobs):
            rows.append(row)
            if on_row is not None:
                on_row(row)
            if fail_fast and row.status == FAILED:
                break
    finally:
        if started_here:
            ray.shutdown()
    return rows


def _rows(ray: Any, tasks: Sequence[BatchTask], jobs: int | None) -> Iterator[BatchRow]:
    if not tasks:
        return
    import ray.data

    with warnings.catch_warnings():
        # Ray's DataContext warns about its own deprecated defaults (use_push_based_shuffle, in 2.60).
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.")
        context = ray.data.DataContext.get_current()
    saved = {name: getattr(context, name) for name in _CONTEXT}
    for name, value in _CONTEXT.items():
        setattr(context, name, value)
    try:
        cpus = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        blocks = min(len(tasks), cpus * BLOCKS_PER_CPU)
        # Largest first, dealt round-robin: every block gets a fair share of big and small inputs.
        largest_first = sorted(tasks, key=lambda t: (-t.size, t.index))
        dealt = [task for start in range(blocks) for task in largest_first[start::blocks]]
        items = [{"task": orjson.dumps(t.to_dict())} for t in dealt]
        dataset = ray.data.from_items(items, override_num_blocks=blocks)
        mapped = dataset.map_batches(compact_batch, batch_size=1, batch_format="numpy", num_cpus=1,
                                     **_at_most(ray, jobs))
        for batch in mapped.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
            for payload in batch["row"]:
                yield BatchRow.from_dict(orjson.loads(bytes(payload)))
    finally:
        for name, value in saved.items():
            setattr(context, name, value)


def _at_most(ray: Any, jobs: int | None) -> dict[str, Any]:
    """map_batches' cap on concurrent tasks: ``compute`` since Ray 2.51, ``concurrency`` before."""
    if jobs is None:
        return {}
    strategy = getattr(ray.data, "TaskPoolStrategy", None)
    if strategy is not None:
        return {"compute": strategy(size=jobs)}
    return {"concurrency": jobs}


def _init(ray: Any, address: str | None, jobs: int | None) -> None:
    # Ray's own notices (token auth, progress bars off) would clutter the run; its errors still show.
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)
    options: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address:
        _probe(address)
        options["address"] = address
    else:
        from core.batch.runner import default_jobs

        # A local instance for this run reports nothing anywhere (unless the caller set the variable).
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        options.update(num_cpus=jobs or default_jobs(), include_dashboard=False)
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError) as exc:  # no cluster there, or another Ray version on it
        where = f"join the Ray cluster at {address}" if address else "start a local Ray instance"
        raise ConfigError(f"cannot {where}: {exc}", fix=CLUSTER_FIX if address else None) from None


def _probe(address: str, timeout: float = PROBE_SECONDS) -> None:
    """Fail fast on a HOST:PORT nobody answers on: ray.init would retry it for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}", fix=CLUSTER_FIX) from None


def _import_ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError:
        raise ConfigError("--engine ray needs Ray Data, which is not installed", fix=INSTALL_FIX) from None
    return ray
