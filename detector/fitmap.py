"""Where a fall's models are polished: one after another in this process, or side by side in
worker processes a measuring run lends (pipeline.fitpool). A polish is Python-bound (a few dozen
points, one to three parameters), so threads would take turns on the interpreter; each polish
(a model from one of its starts, or a refit on fresh noise) is independent of the others and
gives the same figures wherever it runs."""
from __future__ import annotations

import contextlib
import contextvars

from detect_caches.detector.fallmodels import ModelFit, refine

_POLISHER: contextvars.ContextVar = contextvars.ContextVar("detect_caches_polisher", default=None)


@contextlib.contextmanager
def polished_by(polisher):
    """Within the block, fits in this thread hand their polishes to ``polisher`` (a callable
    taking [(window, model, start)] and returning each one's fallmodels.refine, in order), or
    polish here where it is None or fails."""
    token = _POLISHER.set(polisher)
    try:
        yield
    finally:
        _POLISHER.reset(token)


def polish_each(items: list) -> list[ModelFit]:
    """fallmodels.refine of each (window, model, start) in ``items``, in order."""
    polisher = _POLISHER.get()
    if polisher is not None and len(items) > 1:
        try:
            return polisher(items)
        except Exception:   # a worker lost: the same polish here (the pool says why, once)
            pass
    return [refine(win, model, start) for win, model, start in items]


def polish_models(win, tasks: list) -> list[ModelFit]:
    """Each (model, starts) in ``tasks`` polished on ``win``: each start on its own (the longest
    polish of one start, not of a model's three, bounds a fall), and of a model's polished starts
    the first with the least rss."""
    done = iter(polish_each([(win, model, start) for model, starts in tasks for start in starts]))
    return [min([next(done) for _ in starts], key=lambda f: f.rss) for _, starts in tasks]
