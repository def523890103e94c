"""Reading a user's file without hanging or running out of memory: only regular files, opened
without blocking (a FIFO would wait for a writer forever), read up to a byte cap that holds for
devices and pipes too (their st_size is 0), decoded as UTF-8; JSON parsed strictly (no NaN or Infinity, no recursion blow-up)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from detect_caches.errors import InputError

MAX_BYTES = 256 * 1024 * 1024   # measurements of a whole fleet fit many times over
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_INT_DIGITS = 40             # 2^64 has 20 digits; JSON integers longer than this are refused


def read_bytes_bounded(path: str | Path, *, what: str = "file", max_bytes: int = MAX_BYTES) -> bytes:
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path} is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path} is not a regular file (a pipe, device or socket); give a {what} on disk")
    if st.st_size > max_bytes:
        raise InputError(f"{path} is larger than {max_bytes // 2**20} MiB; that is not a {what}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:   # the file grew while read
                raise InputError(f"{path} is larger than {max_bytes // 2**20} MiB; that is not a {what}")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text_bounded(path: str | Path, *, what: str = "file", max_bytes: int = MAX_JSON_BYTES) -> str:
    raw = read_bytes_bounded(path, what=what, max_bytes=max_bytes)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not a UTF-8 text {what}") from None
    if "\0" in text:
        raise InputError(f"{path} is not a text {what}")
    return text


def read_json_bounded(path: str | Path, *, what: str = "JSON file", label: str = "") -> object:
    """``path`` parsed as JSON, or InputError: one sentence naming the file (``label`` before
    it, e.g. "profile"). NaN and Infinity are refused: JSON does not have them, and a figure
    read as NaN would pass every range check."""
    text = read_text_bounded(path, what=what)
    name = f"{label} {path}" if label else str(path)
    if not text.strip():
        raise InputError(f"{name} is empty")

    def refuse(constant: str):
        raise InputError(f"{name} holds {constant}, which is not a number JSON allows")

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:   # no figure has that many digits
            raise InputError(f"{name} holds an integer of {len(digits.lstrip('-'))} digits, which no "
                             f"figure of a {what} has")
        return int(digits)
    try:
        return json.loads(text, parse_constant=refuse, parse_int=integer)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{name} is nested too deeply to be a {what}") from None
    except ValueError as exc:          # whatever else the parser refuses (a number it cannot hold)
        raise InputError(f"{name} is not valid JSON ({str(exc).splitlines()[0][:100]})") from None
