"""Option types shared by several commands."""

from pathlib import Path
from typing import Annotated

import typer


StoreOption = Annotated[Path | None, typer.Option(
    "--store", envvar="CAG_STORE", help="Store folder (default: $CAG_HOME/stores/default).")]
RayOption = Annotated[str | None, typer.Option(
    "--ray", help="Run on a Ray cluster: auto (the one this machine belongs to, else a new "
                                    "local one), local (a new local one) or HOST:PORT (docs/cluster.md).")]
RayWorkersOption = Annotated[int | None, typer.Option(
    "--ray-workers", min=1, help="--ray: workers per model (default: one per GPU, else one per "
                                 "--ray-cpus-per-worker CPUs).")]
RayCpusOption = Annotated[int, typer.Option(
    "--ray-cpus-per-worker", min=1, help="--ray: CPUs (torch threads) each worker takes.")]
RayGpusOption = Annotated[float, typer.Option(
    "--ray-gpus-per-worker", help="--ray: the share of one GPU each worker takes (0.25: four workers per "
                                  "GPU, for small models that leave a large GPU mostly idle).")]


def ray_options(address: str | None, workers: int | None, cpus_per_worker: int, gpus_per_worker: float = 1.0):
    """RayOptions for --ray ADDRESS, or None (the local path) without it; Ray is imported only then."""
    if address is None:
        return None
    from cag.distributed.options import RayOptions
    return RayOptions(address, workers, cpus_per_worker, gpus_per_worker)
