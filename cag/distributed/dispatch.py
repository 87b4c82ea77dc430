"""A work queue over named pools of Ray actors.

Jobs go to the least busy actor of their pool, at most `per_actor` at a time per actor (one running,
one waiting, so an actor never idles on the driver's round trip). Results come back as they finish.
An actor that dies for good (Ray's own restarts spent) leaves its pool and its jobs go to the others:
every job is idempotent (content-addressed cache files, answers recomputed).
"""

import logging
from collections import deque
from dataclasses import dataclass

import ray
from ray.exceptions import RayActorError, RayTaskError

from cag.errors import CagError

log = logging.getLogger(__name__)


@dataclass
class _Job:
    pool: str
    method: str
    args: tuple
    tag: object
    tries: int = 0


@dataclass(eq=False)  # a slot is itself: two are never equal
class _Slot:
    actor: object
    busy: int = 0


class Dispatcher:
    def __init__(self, per_actor: int = 2, max_tries: int = 3):
        self.per_actor, self.max_tries = per_actor, max_tries
        self.pools: dict[str, list[_Slot]] = {}
        self.queued: dict[str, deque] = {}
        self.in_flight: dict = {}  # ObjectRef -> (_Job, _Slot)

    def add_pool(self, name: str, actors: list) -> None:
        self.pools[name] = [_Slot(a) for a in actors]

    def submit(self, pool: str, method: str, *args, tag=None) -> None:
        """Queue a job for pool `pool` (which may be added later)."""
        self.queued.setdefault(pool, deque()).append(_Job(pool, method, args, tag))

    @property
    def outstanding(self) -> int:
        """Jobs queued or running."""
        return len(self.in_flight) + sum(len(q) for q in self.queued.values())

    @property
    def capacity(self) -> int:
        """Jobs the actors can hold at once."""
        return self.per_actor * sum(len(slots) for slots in self.pools.values())

    def next_result(self, timeout: float | None = None):
        """(tag, result) of the next job to finish, or None when nothing is running or `timeout`
        passes. A CagError raised in a worker is raised here as one."""
        while True:
            self._dispatch()
            if not self.in_flight:
                return None
            ready, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=timeout)
            if not ready:
                return None
            job, slot = self.in_flight.pop(ready[0])
            slot.busy -= 1
            try:
                return job.tag, ray.get(ready[0])
            except RayActorError as exc:
                self._lost(job, slot, exc)
            except RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, CagError):
                    raise CagError(str(cause)) from None
                raise

    def _dispatch(self) -> None:
        for name, queue in self.queued.items():
            slots = self.pools.get(name, [])
            while queue and slots:
                slot = min(slots, key=lambda s: s.busy)
                if slot.busy >= self.per_actor:
                    break
                job = queue.popleft()
                ref = getattr(slot.actor, job.method).remote(*job.args)
                self.in_flight[ref] = (job, slot)
                slot.busy += 1

    def _lost(self, job: _Job, slot: _Slot, exc: Exception) -> None:
        """An actor died for good: drop it, give its job to another one of its pool."""
        slots = self.pools[job.pool]
        if slot in slots:
            slots.remove(slot)
            log.warning("a Ray worker of %s died (%s); %d left", job.pool, str(exc).splitlines()[0], len(slots))
        job.tries += 1
        if not slots or job.tries >= self.max_tries:
            raise CagError(f"Ray workers of {job.pool} died ({str(exc).splitlines()[0]}): see the Ray logs "
                           "(/tmp/ray/session_latest/logs on each node) and run the command again; "
                           "what was written is kept.")
        self.queued[job.pool].appendleft(job)

    def stop(self) -> None:
        """Kill every actor (their models leave memory now, not when the driver exits)."""
        for slots in self.pools.values():
            for slot in slots:
                ray.kill(slot.actor)
        self.pools.clear()
