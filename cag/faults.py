"""Crash injection for resume tests: `CAG_FAULT=point:n` kills the process (SIGKILL, like kill -9)
the n-th time execution reaches `fault_point("point")`. Inactive unless the variable is set.

`CAG_FAULT_ONCE=FILE` makes it one kill among all processes sharing the setting (Ray workers, and
a worker Ray restarts): only the process that creates FILE dies; the others run through."""

import os
import signal

_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    spec = os.environ.get("CAG_FAULT")
    if not spec:
        return
    point, _, count = spec.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(count or 1) and _first_to_fall():
        os.kill(os.getpid(), signal.SIGKILL)


def _first_to_fall() -> bool:
    once = os.environ.get("CAG_FAULT_ONCE")
    if not once:
        return True
    try:
        os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True
