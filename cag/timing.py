"""Milliseconds per step of one answer, measured where the step runs and returned with its result
(a mode's BuiltContext, a translation's chunks), never written into a dict shared across packages."""

import time
from contextlib import contextmanager


class Timings(dict):
    """step name -> milliseconds; `measure` adds a block's wall time to its step."""

    @contextmanager
    def measure(self, step: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self[step] = self.get(step, 0.0) + (time.perf_counter() - start) * 1e3

    def add(self, other: dict) -> "Timings":
        """Add `other`'s steps to these (in place); self."""
        for step, ms in other.items():
            self[step] = self.get(step, 0.0) + ms
        return self
