"""Work done in threads while the GPU runs the latency sweep and the probes: the plotting imports
(matplotlib, and through reports.plot the detector's levels: much of the analysis stack, which
the analysis beside the latency sweep imports too) and matplotlib's fonts, and the plot itself."""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future


def _warm_up() -> Future:
    """Import the plotting stack and set up matplotlib's fonts in a thread, while the GPU runs
    the latency sweep (the main thread waits on the GPU with the GIL released)."""
    fut: Future = Future()

    def work():
        try:
            from detect_caches.reports.plot import warm_fonts
            warm_fonts()
            fut.set_result(True)
        except BaseException as exc:   # the main thread imports again and reports it
            fut.set_exception(exc)
    threading.Thread(target=work, name="detect-caches-warm-up", daemon=True).start()
    return fut


def _render_later(detection, title: str, vendor: str | None = None) -> Future:
    """The plot, rendered in a thread while the probes run (they add no points to its curves);
    the future's ``render_seconds`` says how long it took."""
    fut: Future = Future()

    def work():
        try:
            from detect_caches.reports.plot import render_plot
            t = time.perf_counter()
            png = render_plot(detection, title, vendor=vendor)
            fut.render_seconds = round(time.perf_counter() - t, 3)   # the run's split (method.plot)
            fut.set_result(png)
        except BaseException as exc:
            fut.set_exception(exc)
    threading.Thread(target=work, name="detect-caches-plot", daemon=True).start()
    return fut
