"""Write files whole or not at all: a temporary file in the same folder, then a rename. The
temporary file is created exclusively (O_EXCL, never through a link) with mode 0666, which the
kernel narrows by the user's umask: the file gets the mode a plain new file would have, without
reading or changing the process's umask (a global that other threads' files depend on)."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def create_exclusive(folder: Path, name: str, mode: int = 0o666) -> tuple[int, Path]:
    """A new file in ``folder`` named after ``name``, opened for writing: (fd, path)."""
    for _ in range(100):
        tmp = Path(folder) / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, FLAGS, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name} in {folder}")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = create_exclusive(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: Path, text: str) -> None:
    # a name that is not UTF-8 (a folder's bytes) shown escaped, never a failed write
    write_bytes_atomic(path, text.encode("utf-8", "backslashreplace"))
