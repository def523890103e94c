"""What keeps the bytecode cache from being turned against its user: code read from it runs in
their process, so nobody else may be able to put a file there.

The cache folder must be the user's own and writable by nobody else, and so must every folder
above it be (or be the system's, or sticky like /tmp, where others cannot rename what is not
theirs); a folder that is the user's but readable by others is made private (0700). A cached
file is read only if it is a regular file (not a link) of the user's that nobody else can write.
Files are written through temporary files created exclusively (O_EXCL), never through a link,
under names nobody can guess, then renamed."""
from __future__ import annotations

import os
import secrets
import stat

READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
              | getattr(os, "O_NONBLOCK", 0))     # a FIFO planted there must not hang the import
WRITE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))


def _others_can_write(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _safe_above(path: str, uid: int) -> str:
    """'' if no one but the user (or the system) can replace ``path`` or a folder above it."""
    here = os.path.dirname(path)
    while True:
        try:
            st = os.stat(here)
        except OSError as exc:
            return f"cannot check {here}: {exc.strerror or exc}"
        if st.st_uid not in (uid, 0):
            return f"{here} above it belongs to another user (uid {st.st_uid})"
        if _others_can_write(st) and not st.st_mode & stat.S_ISVTX:
            return f"{here} above it can be written by other users"
        up = os.path.dirname(here)
        if up == here:
            return ""
        here = up


def _make_folders(path: str) -> None:
    """``path`` and the folders missing above it, each created 0700 (not by the umask: a umask
    of 002 would leave them writable by the group)."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        up = os.path.dirname(path)
        if up == path:
            break
        path = up
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass


def make_private_root(root: str) -> str:
    """Create or check the cache folder; '' when it is safe to use (or cannot be made at all:
    then nothing is read from it), else why not (one phrase)."""
    uid = os.geteuid()
    real = os.path.realpath(root)
    try:
        _make_folders(real)
        st = os.lstat(real)
    except OSError:     # nothing can be read from a folder that is not there, nor written: harmless
        return ""
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if st.st_uid != uid:
        return f"it belongs to another user (uid {st.st_uid})"
    if _others_can_write(st):
        return "other users can write to it"
    if st.st_mode & 0o077:
        try:
            os.chmod(real, 0o700)      # the user's own, readable by others: made private
        except OSError as exc:
            return f"cannot make it private ({exc.strerror or exc})"
    return _safe_above(real, uid)


def read_trusted(path: str) -> bytes | None:
    """The file's bytes if it is a regular file of the user's that nobody else can write."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or _others_can_write(st):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(64 << 20)
    except OSError:
        return None
    finally:
        os.close(fd)


def write_private(path: str, data: bytes) -> None:
    """``path`` replaced whole by ``data`` (0600), through an exclusive temporary file."""
    tmp = f"{path}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, WRITE_FLAGS, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
