"""Analyses kept between the passes of one run: each refining round adds points to the falls
whose capacity stayed uncertain and analyses every sweep again; a sweep whose curve and settings
did not change gives the same analysis, so it is taken from an earlier pass (a copy: the caller
may refine it further). One Memo per run, never a module's state: nothing outlives the run."""
from __future__ import annotations

import copy
import hashlib
import pickle


class Memo:
    def __init__(self) -> None:
        self._kept: dict[bytes, tuple[object, list[str]]] = {}

    def get(self, fn, curve, warnings: list[str], **settings):
        """``fn(curve, warnings, **settings)``, or what it gave for the same inputs before; the
        warnings it said are said again."""
        key = _key(fn, curve, settings)
        if key not in self._kept:
            said: list[str] = []
            self._kept[key] = (fn(curve, said, **settings), said)
        result, said = self._kept[key]
        warnings += said
        return copy.deepcopy(result)

    def call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, or a copy of what it gave for equal arguments before."""
        key = _key(fn, args, kwargs)
        if key not in self._kept:
            self._kept[key] = (fn(*args, **kwargs), [])
        return copy.deepcopy(self._kept[key][0])


def _key(fn, args, kwargs: dict) -> bytes:
    return hashlib.sha256(pickle.dumps((fn.__module__, fn.__qualname__, args, sorted(kwargs.items())),
                                       protocol=4)).digest()


def analyze(memo: Memo | None, fn, curve, warnings: list[str], **settings):
    """``fn`` through ``memo`` where there is one."""
    return fn(curve, warnings, **settings) if memo is None else memo.get(fn, curve, warnings, **settings)
