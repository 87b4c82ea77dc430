"""The one progress protocol: long jobs (ingest, eval, train) report here, the CLI draws it (bars
on a terminal, plain lines in a log); the library never prints.

Tasks are named. `start` a task (its total may be unknown), `grow` its total as more work is found
(ingest learns a file's chunk count when it has chunked it), `advance` it; `info` values are shown
beside it (a `tokens` count is shown as a rate since the task started)."""


class Progress:
    def start(self, task: str, total: int | None = None) -> None: ...

    def grow(self, task: str, more: int) -> None: ...

    def advance(self, task: str, n: int = 1, **info) -> None: ...
