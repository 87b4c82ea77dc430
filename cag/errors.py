"""The one user-facing error type: its message is shown as a single line by the CLI."""


class CagError(Exception):
    """Bad user input or an unusable resource; the message names the problem and the fix."""


class CorruptCacheError(CagError):
    """A stored chunk cache failed its integrity check (truncated, corrupted or not a cag file)."""


class DiskFullError(CagError):
    """A write failed because the disk (or the user's quota) is full. Nothing was left half-written:
    the temporary file is removed, a SQLite transaction rolled back."""

    def __init__(self, folder, needed: int | None, free: int | None, what: str, then: str = ""):
        self.folder, self.needed, self.free, self.what = folder, needed, free, what
        self.then = then or "free space there and run the command again."
        size = f"{needed:,} bytes needed to write {what}" if needed is not None else f"writing {what} failed"
        room = f", {free:,} bytes free" if free is not None else ""
        super().__init__(f"The disk holding {folder} is full: {size}{room}. Nothing was left half-written; {self.then}")

    def where(self, folder, then: str) -> "DiskFullError":
        """The same error, naming `folder` (e.g. the store) and what to do next."""
        return DiskFullError(folder, self.needed, self.free, self.what, then)


class StoreBusyError(CagError):
    """Another process holds a store's write lock (a second writer is refused, not queued)."""
