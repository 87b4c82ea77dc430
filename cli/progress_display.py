"""Progress for the CLI: rich bars on a terminal; plain lines when stderr goes to a log.

rich draws nothing to a redirected stream until a job ends, so a long `cag eval ... 2> log` looked
dead for an hour. `PlainProgress` takes the part of rich.progress.Progress's API the commands use
(add_task, update, advance, the context manager) and prints one line per task at most every
`every` seconds, plus a last line when the job ends.
"""

import sys
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from cag.progress import Progress as ProgressProtocol

DEFAULT_EVERY = 30.0


def progress_display(*columns, every: float = DEFAULT_EVERY, stream=None):
    """rich's Progress on an interactive stderr, else PlainProgress."""
    stream = stream or sys.stderr
    console = Console(file=stream)
    if console.is_terminal:
        return Progress(*columns, console=console)
    return PlainProgress(stream, every)


@contextmanager
def progress_bars(stream=None):
    """The CLI's drawing of cag.progress.Progress, for the length of a `with` block."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
               TextColumn("{task.fields[info]}"))
    with progress_display(*columns, stream=stream) as display:
        yield ProgressBars(display)


class ProgressBars(ProgressProtocol):
    """cag.progress.Progress drawn on a rich Progress (or a PlainProgress)."""

    def __init__(self, display):
        self.display = display
        self.tasks: dict[str, dict] = {}  # name -> {"id", "total", "started", "tokens"}

    def start(self, task: str, total: int | None = None) -> None:
        if task in self.tasks:
            self.tasks[task]["total"] = total
            self.display.update(self.tasks[task]["id"], total=total)
            return
        self.tasks[task] = {"id": self.display.add_task(task, total=total, info=""), "total": total,
                            "started": time.perf_counter(), "tokens": 0}

    def grow(self, task: str, more: int) -> None:
        if task not in self.tasks:
            self.start(task)
        state = self.tasks[task]
        state["total"] = (state["total"] or 0) + more
        self.display.update(state["id"], total=state["total"])

    def advance(self, task: str, n: int = 1, **info) -> None:
        if task not in self.tasks:
            self.start(task)
        state = self.tasks[task]
        shown = []
        for key, value in info.items():
            if key == "tokens":  # a rate since the task started, right from its first line
                state["tokens"] += value
                elapsed = max(time.perf_counter() - state["started"], 1e-6)
                shown.append(f"{state['tokens'] / elapsed:,.0f} tok/s")
            else:
                shown.append(f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}")
        self.display.update(state["id"], advance=n, info="  ".join(shown))


class PlainProgress:
    def __init__(self, stream, every: float = DEFAULT_EVERY):
        self.stream, self.every = stream, every
        self.tasks: list[dict] = []

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc) -> None:
        for task in self.tasks:
            if task["printed"] != task["completed"]:
                self._print(task)

    def add_task(self, description: str, total: float | None = None, **fields) -> int:
        now = time.monotonic()
        self.tasks.append({"description": description, "total": total, "completed": 0, "fields": fields,
                           "start": now, "last": now, "printed": 0})
        return len(self.tasks) - 1

    def update(self, task_id: int, *, total: float | None = None, advance: float | None = None,
               completed: float | None = None, **fields) -> None:
        task = self.tasks[task_id]
        if total is not None:
            task["total"] = total
        if completed is not None:
            task["completed"] = completed
        if advance:
            task["completed"] += advance
        task["fields"].update(fields)
        done = task["total"] is not None and task["completed"] >= task["total"]
        if done or time.monotonic() - task["last"] >= self.every:
            self._print(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def _print(self, task: dict) -> None:
        now = time.monotonic()
        elapsed = now - task["start"]
        done, total = task["completed"], task["total"]
        line = f"{task['description']}: {done:g}" + (f"/{total:g}" if total is not None else "")
        if total and 0 < done < total:
            line += f", about {elapsed / done * (total - done) / 60:.1f} min left"
        extra = "  ".join(str(v) for v in task["fields"].values() if v not in ("", None))
        line += f" ({elapsed / 60:.1f} min)" + (f"  {extra}" if extra else "")
        print(line, file=self.stream, flush=True)
        task["last"], task["printed"] = now, done
