"""Connect to a Ray cluster (or start a local one), size the workers, and the environment they run in.

The code workers run: a worker imports cag from its node's Python. A driver run from a source
checkout also puts that checkout first on the workers' PYTHONPATH (right for a local cluster, and for
a cluster whose nodes mount the checkout at the same path); otherwise install the same cag on every
node, or submit the driver with `ray job submit --working-dir .` (docs/cluster.md).
"""

import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import ray

import cag
from cag.distributed.options import RayOptions
from cag.errors import CagError

log = logging.getLogger(__name__)
# what workers need to see as the driver does: where models live, offline mode, debugging, faults
FORWARDED_ENV = ("CAG_HOME", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "CAG_DEBUG", "CAG_FAULT_ONCE")
MAX_RESTARTS = 2  # a worker killed mid-batch is restarted (its model loaded again) and the batch retried


@dataclass(frozen=True)
class Cluster:
    cpus: int
    gpus: int
    started: bool  # a local cluster this process started (it ends with the run)


@dataclass(frozen=True)
class WorkerPlan:
    """How many actors per model and what each reserves; `device` as the actors see it."""

    per_model: int
    num_cpus: int
    num_gpus: float  # 0, or the share of one GPU each actor reserves
    device: str  # "cuda" (the GPU Ray gave the actor) or "cpu"


@contextlib.contextmanager
def connect(options: RayOptions):
    """A connection to the cluster `options.address` names for the length of a `with` block; an
    already initialized Ray (eval's ingest, a test's cluster) is used as it is and left open."""
    if ray.is_initialized():
        yield _describe(started=False)
        return
    started = _init(options.address)
    try:
        yield _describe(started)
    finally:
        ray.shutdown()


def _init(address: str) -> bool:
    """ray.init for `address`; True when it started a local cluster."""
    common = dict(logging_level=logging.WARNING, log_to_driver=log.isEnabledFor(logging.INFO))
    try:
        if address == "local":
            ray.init(address="local", include_dashboard=False, **common)
            return True
        if address == "auto":
            env = os.environ.get("RAY_ADDRESS", "")
            if ":" in env and "://" not in env:
                _check_reachable(env, "RAY_ADDRESS")
            try:
                ray.init(address="auto", **common)
                return False
            except ConnectionError:  # no cluster on this machine: a local one
                log.info("no running Ray cluster found: starting a local one")
                ray.init(address="local", include_dashboard=False, **common)
                return True
        _check_reachable(address, "--ray")
        ray.init(address=address, **common)
        return False
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise CagError(f"--ray {address}: Ray could not connect ({str(exc).splitlines()[0]}).") from exc


def _check_reachable(address: str, what: str) -> None:
    """A quick TCP check first: ray.init waits minutes on an address where nothing listens."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=3).close()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise CagError(f"{what} {address}: no Ray cluster answers there ({reason}); pass the address "
                       "`ray start --head` printed, or --ray local.") from None


def _describe(started: bool) -> Cluster:
    resources = ray.cluster_resources()
    return Cluster(int(resources.get("CPU", 0)), int(resources.get("GPU", 0)), started)


def plan_workers(cluster: Cluster, models: int, options: RayOptions, device: str = "auto") -> WorkerPlan:
    """Actors per model for `models` models held at once: as many as the cluster's GPUs (at
    `options.gpus_per_worker` each) and CPUs hold when it has GPUs and `device` allows them, else
    as many as its CPUs hold; refused when they cannot all be placed."""
    device = (device or "auto").strip().lower()
    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise CagError(f"--device {device}: Ray workers run on cpu or cuda; pass --device auto, cpu or cuda.")
    if device.startswith("cuda") and cluster.gpus == 0:
        raise CagError(f"--device {device}: the Ray cluster has no GPUs; pass --device cpu (or auto).")
    gpu = device != "cpu" and cluster.gpus > 0
    cpus, models, share = options.cpus_per_worker, max(models, 1), options.gpus_per_worker
    gpu_slots = int(cluster.gpus / share + 1e-9)  # the epsilon keeps 3 / 0.1 from flooring to 29
    cpu_slots = cluster.cpus // cpus
    per_model = options.workers or max(1, (min(gpu_slots, cpu_slots) if gpu else cpu_slots) // models)
    actors = per_model * models
    if gpu and actors > gpu_slots:
        raise CagError(f"{per_model} Ray worker(s) per model x {models} model(s) x {share:g} GPU need "
                       f"{actors * share:g} GPUs; the cluster has {cluster.gpus}: pass --ray-workers "
                       f"{max(1, gpu_slots // models)} or a smaller --ray-gpus-per-worker.")
    if actors * cpus > cluster.cpus:
        raise CagError(f"{per_model} Ray worker(s) per model x {models} model(s) x {cpus} CPU(s) need "
                       f"{actors * cpus} CPUs; the cluster has {cluster.cpus}: pass fewer --ray-workers "
                       "or --ray-cpus-per-worker.")
    return WorkerPlan(per_model, cpus, share if gpu else 0, "cuda" if gpu else "cpu")


def worker_env(threads: int) -> dict:
    """Environment variables of the actors: the driver's cag home and offline settings, this checkout
    first on PYTHONPATH (when the driver runs one), the thread count; CAG_WORKER_FAULT becomes the
    workers' CAG_FAULT (crash tests)."""
    env = {key: os.environ[key] for key in FORWARDED_ENV if key in os.environ}
    if os.environ.get("CAG_WORKER_FAULT"):
        env["CAG_FAULT"] = os.environ["CAG_WORKER_FAULT"]
    root = Path(cag.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file():  # a source checkout, not an installed package
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def actor_options(plan: WorkerPlan) -> dict:
    """Ray options of one actor: its resources, restarts (a killed worker comes back and its batch
    is retried: every task is idempotent) and environment."""
    return dict(num_cpus=plan.num_cpus, num_gpus=plan.num_gpus, max_restarts=MAX_RESTARTS,
                max_task_retries=MAX_RESTARTS, runtime_env={"env_vars": worker_env(plan.num_cpus)})


def start_actors(cls, plan: WorkerPlan, *args) -> list:
    """`plan.per_model` actors of plain class `cls` built with `args`, every one ready (models
    loaded); a worker that cannot start is a CagError naming its node and the fix."""
    remote = ray.remote(cls)
    actors = [remote.options(**actor_options(plan)).remote(*args) for _ in range(plan.per_model)]
    problems = [p for p in ray.get([a.problem.remote() for a in actors]) if p]
    if problems:
        for actor in actors:
            ray.kill(actor)
        raise CagError(problems[0])
    return actors
