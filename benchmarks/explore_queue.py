"""Do CPU-side gaps between a point's timed launches spoil its fit? The same points measured
with and without a thread holding the interpreter (as imports, compiles and the plot do during a
run), at several interpreter switch intervals, and with 0, 1 or 2 ms of GPU sleep queued before
the timed launches (so that the queue never drains while the measuring thread waits for the
interpreter). Exploration for issue 18; the records (examples/h200/2026-11-30/queue/) were taken
with a `queue_ahead_ms` hook in TritonGPU._event_times (a torch.cuda._sleep after the warm-up
launch) that did not help and was removed: the ahead column needs it back.

    python3 benchmarks/explore_queue.py --reps 10 > queue.log
"""
from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np

from detect_caches.measure.gpu.triton_gpu import TritonGPU
from detect_caches.measure.point import PointMeter, PointPolicy
from detect_caches.measure.session import SessionOptions, plan_sweeps

POINTS = (("shared", 4 << 20), ("shared", 16 << 20), ("shared", 56 << 20), ("shared", 300 << 20),
          ("private", 64 << 10), ("private", 200 << 10))


def busy(stop: threading.Event) -> None:
    while not stop.is_set():
        _ = [i * i for i in range(2000)]          # pure Python: holds the interpreter, as imports do


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--switch-ms", default="0.5", help="interpreter switch intervals to try (comma-separated)")
    ap.add_argument("--ahead-ms", default="0", help="GPU sleeps queued before the timed launches (needs the hook)")
    ap.add_argument("--idle", action="store_true", help="also without the busy thread")
    args = ap.parse_args()
    dev = TritonGPU(0)
    plans, _ = plan_sweeps(dev.facts, SessionOptions(), dev.max_working_set_bytes())
    cfg = {p.config.sweep: p.config for p in plans}
    cus = dev.facts.compute_units
    sys.setswitchinterval(0.0005)                  # as the tool sets it while measuring
    meter = PointMeter(dev, PointPolicy())
    for sweep, ws in POINTS:                       # compile and warm every variant first
        c = cfg[sweep]
        meter.measure(c, ws if sweep == "private" else ws // c.rows(cus) // 1024 * 1024, phase="warm")
    print(f"{'background':10s} {'switch ms':>9s} {'ahead ms':>8s} {'point':>14s} {'median GB/s':>12s} {'sd %':>6s} "
          f"{'r2<0.999':>8s} {'remeasured':>10s} {'ms/point':>9s}")
    grid = [(bg, float(sw), float(ah)) for bg in ((False, True) if args.idle else (True,))
            for sw in args.switch_ms.split(",") for ah in args.ahead_ms.split(",")]
    for bg, switch, ahead in grid:
        sys.setswitchinterval(switch / 1e3)
        if ahead and not hasattr(dev, "queue_ahead_ms"):
            raise SystemExit("the queue-ahead hook was removed from TritonGPU (see this script's docstring)")
        dev.queue_ahead_ms = ahead
        stop = threading.Event()
        if bg:
            threading.Thread(target=busy, args=(stop,), daemon=True).start()
        for sweep, ws in POINTS:
            c = cfg[sweep]
            sb = ws if sweep == "private" else ws // c.rows(cus) // 1024 * 1024
            bws, poor, rem, dts = [], 0, 0, []
            for _ in range(args.reps):
                meter._guess_gbs.clear()
                meter.measure(c, sb, phase="size")     # as in a sweep: the guess from a neighbour
                t = time.perf_counter()
                m = meter.measure(c, sb, phase="x")
                dts.append((time.perf_counter() - t) * 1e3)
                bws.append(m.bandwidth_gbs)
                poor += "poor_r2" in m.flag_set
                rem += "remeasured" in m.flag_set
            b = np.array(bws)
            med = np.nanmedian(b) if np.isfinite(b).any() else np.nan
            print(f"{'busy' if bg else 'idle':10s} {switch:9.2f} {ahead:8.1f} {sweep[:2]} {ws / 2**20:9.3f}M {med:12.0f} "
                  f"{100 * np.nanstd(b) / med:6.2f} {poor:8d} {rem:10d} {np.mean(dts):9.1f}"
                  f" nan {int(np.isnan(b).sum())}", flush=True)
        stop.set()
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
