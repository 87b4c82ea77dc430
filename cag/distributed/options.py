"""What a Ray run is told: the cluster's address and the workers' size (no Ray import here)."""

import re
from dataclasses import dataclass

from cag.errors import CagError

_HOST_PORT = re.compile(r"^\[?[A-Za-z0-9.:_-]+\]?:\d{1,5}$")


@dataclass(frozen=True)
class RayOptions:
    """`address`: "auto" (the cluster this machine belongs to: $RAY_ADDRESS or one `ray start`ed
    here, else a new local one), "local" (always a new local cluster) or HOST:PORT (a running
    cluster's GCS address). `workers`: actors per model (default: as many as the cluster's GPUs
    hold at `gpus_per_worker` each, else as many as its CPUs hold at `cpus_per_worker` each). `cpus_per_worker`: each actor's Ray CPUs and
    torch threads. `gpus_per_worker`: the share of one GPU each actor reserves (0.25: four actors
    on each GPU; small models leave a large GPU mostly idle, so several workers answer more)."""

    address: str = "auto"
    workers: int | None = None
    cpus_per_worker: int = 1
    gpus_per_worker: float = 1.0

    def __post_init__(self):
        address = (self.address or "").strip()
        if address.startswith("ray://"):
            raise CagError(f"--ray {address}: Ray Client addresses are not supported; run cag on a node of "
                           "the cluster (e.g. `ray job submit -- cag ingest ... --ray auto`) or pass its "
                           "GCS address HOST:PORT.")
        if address not in ("auto", "local") and not _HOST_PORT.match(address):
            raise CagError(f"--ray {address!r}: give auto, local or a cluster's address HOST:PORT "
                           "(the one `ray start --head` prints).")
        if self.workers is not None and self.workers < 1:
            raise CagError(f"--ray-workers {self.workers}: give at least 1.")
        if self.cpus_per_worker < 1:
            raise CagError(f"--ray-cpus-per-worker {self.cpus_per_worker}: give at least 1.")
        # an actor holds its model on one device: more than one GPU would sit idle
        if not 0 < self.gpus_per_worker <= 1:
            raise CagError(f"--ray-gpus-per-worker {self.gpus_per_worker:g}: give a share of one GPU, "
                           "above 0 and at most 1 (0.25: four workers per GPU).")
        object.__setattr__(self, "address", address)
