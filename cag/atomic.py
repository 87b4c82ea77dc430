"""Crash-safe file writes: write to a temporary file in the same folder, fsync, then rename."""

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from cag.errors import DiskFullError

_FULL = (errno.ENOSPC, errno.EDQUOT)


def atomic_write(path: Path, write: Callable[[Path], None], size: int | None = None) -> None:
    """Call `write(tmp_path)` and move the result onto `path` atomically (`size`: the bytes it
    writes, when known, for the message of a full disk).

    A crash at any moment leaves either the old file or the new one, never a partial file (the
    temporary file is removed on error; a kill -9 can leave a `.tmp-*` file, never `path` itself).
    A full disk is a DiskFullError (one line, naming the folder and the bytes needed).
    """
    path = Path(path)
    try:
        _atomic_write(path, write)
    except Exception as exc:
        if disk_full(exc):
            raise DiskFullError(path.parent, size, free_bytes(path.parent), path.name) from exc
        raise


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` says the disk or the quota is full (an OSError, or a library's own error
    carrying the OS's words, as safetensors' does)."""
    if isinstance(exc, DiskFullError):
        return False
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return True
    return any(os.strerror(code) in str(exc) for code in _FULL)


def free_bytes(folder: Path) -> int | None:
    """Free bytes on the disk holding `folder` (or its nearest existing parent); None if unknown."""
    for candidate in (Path(folder), *Path(folder).parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".tmp-{path.name}.", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files: give the usual permissions
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(Path(path), lambda tmp: tmp.write_bytes(data), len(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(Path(path), text.encode("utf-8"))
