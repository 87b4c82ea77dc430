"""The one user-facing error type: its message is shown as a single line by the CLI."""


class CagError(Exception):
    """Bad user input or an unusable resource; the message names the problem and the fix."""


class CorruptCacheError(CagError):
    """A stored chunk cache failed its integrity check (truncated, corrupted or not a cag file)."""


class StoreBusyError(CagError):
    """Another process holds a store's write lock (a second writer is refused, not queued)."""
