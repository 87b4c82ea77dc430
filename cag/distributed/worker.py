"""What every Ray worker of cag is: one model loaded once, the store folder opened for cache files
only (never its catalog: the driver sends what a worker needs), and a problem, said once, when it
cannot start (a missing model, another model version than the driver's, a store folder it cannot
reach). Made a Ray actor by `cluster.start_actors`; a plain class here (tests call it directly)."""

import socket
from dataclasses import dataclass

import torch

from cag.errors import CagError
from cag.models import load_model
from cag.prompt import prompt_layout
from cag.store.store import Store


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker loads: the same fields in every kind of worker's spec."""

    model: str  # as the user named it (an alias, a folder on every node, a hub id)
    dtype: str
    device: str  # "cpu" or "cuda" (the GPU Ray gave it)
    threads: int
    store: str  # the store folder, at the same path on every node


class ModelWorker:
    def __init__(self, spec):
        self.spec, self._problem = spec, None
        try:
            torch.set_num_threads(spec.threads)
            self.lm = load_model(spec.model, spec.dtype, spec.device)
            self.layout = prompt_layout(self.lm.tokenizer)
            self.check_model()
            self.store = self._open_store()
        except Exception as exc:  # a worker that cannot start says why, once, on the driver
            kind = "" if isinstance(exc, CagError) else f"{type(exc).__name__}: "
            self._problem = f"Ray worker on {socket.gethostname()}: {kind}{exc}"

    def check_model(self) -> None:
        """Refuse a model that is not the one the driver planned for (CagError)."""

    def refuse_other_model(self, fingerprint: str) -> None:
        if self.lm.fingerprint != fingerprint:
            raise CagError(f"{self.spec.model} here is {self.lm.fingerprint[:12]}, on the driver "
                           f"{fingerprint[:12]}: give every node the same model files (convert packaged models on "
                           "each node, or share $CAG_HOME).")

    def _open_store(self) -> Store:
        try:
            return Store.open(self.spec.store, catalog=False)
        except CagError as exc:
            raise CagError(f"the store folder {self.spec.store} is not usable here ({exc}): put the store on "
                           "a file system every node mounts at the same path.") from exc

    def problem(self) -> str | None:
        """Why this worker cannot work (None: it is ready)."""
        return self._problem

    def ready(self) -> None:
        if self._problem:
            raise CagError(self._problem)
