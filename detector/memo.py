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
        key = hashlib.sha256(pickle.dumps((fn.__module__, fn.__qualname__, curve, sorted(settings.items())),
                                          protocol=4)).digest()
        if key not in self._kept:
            said: list[str] = []
            self._kept[key] = (fn(curve, said, **settings), said)
        result, said = self._kept[key]
        warnings += said
        return copy.deepcopy(result)


def analyze(memo: Memo | None, fn, curve, warnings: list[str], **settings):
    """``fn`` through ``memo`` where there is one."""
    return fn(curve, warnings, **settings) if memo is None else memo.get(fn, curve, warnings, **settings)
