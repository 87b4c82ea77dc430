"""Crash injection for resume tests: `CAG_FAULT=point:n` kills the process (SIGKILL, like kill -9)
the n-th time execution reaches `fault_point("point")`. Inactive unless the variable is set."""

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
    if _hits[name] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
