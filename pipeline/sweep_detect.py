"""The sweeps and their analysis, refined where a capacity's interval stayed wide (more rounds
while it is still very wide and noise keeps it so, or a fall's rival or contest is still untold): the
measuring run's path (pipeline.api) and the simulated accuracy checks (benchmarks, tests)."""
from __future__ import annotations

import threading
import time

from detect_caches.pipeline.cli_log import get as _logger

LOG = _logger("api")   # -v: each step on stderr (pipeline.cli_log)
REFINE_BUDGET = 48   # measurements each round for the capacities the analysis left uncertain
ROUNDS = 6           # refining rounds at most (at least one): the first for every wide interval, the
                     # others where noise still keeps one wide (SIMULATED, 4 rounds against 2: physics
                     # GPUs 100 x 2 within 3% 91.8 -> 93.6%, formula GPUs 300 x 2 97.8 -> 98.3%; 6
                     # against 4, physics 300 x 2 93.9 -> 94.1%, beyond 20% 7 -> 6, formula 98.0 -> 97.8%)
PRECISION_ROUNDS = 4  # then every size of a fall noise keeps from repeating (detector.precision) read
                      # this many more times, one analysis after them all ...
PRECISION_BUDGET = 96  # ... at most this many measurements a round (SIMULATED, physics GPUs 300 x 2 with
                       # the latency sweep, within 3 / 10 / beyond 20 / levels / spread within 2%: 4
                       # readings, 97.0 / 99.2 / 2 / 100 / 95.4; 3, 96.7 / 99.1 / 3 / 99.8 / 94.8; as many
                       # as the noise repeatability asks, 96.7 / 99.1 / 3 / 99.8 / 95.0; an analysis after
                       # each reading, stopping once precise, 97.0 / 99.2 / 2 / 100 / 95.0 with up to four
                       # more passes on the run's path)


def sweep_and_detect(device, log, opts, on_point=None, *, before_detect=None, polisher=None):
    """The sweeps, the analysis, then more points inside each capacity interval the analysis left
    wide and the analysis again, ROUNDS times at most: (session, detection, analysis seconds).
    ``before_detect`` runs once the sweeps are done (the latency sweep: its points are analysed
    with the rest); ``polisher``: worker processes the fits' polishes go to (pipeline.fitpool),
    or None to polish here."""
    from detect_caches.detector.memo import Memo
    from detect_caches.measure.session import LATENCY_PROBE_SHARE, characterize as sweep, refine_intervals
    session = sweep(device, log, opts, on_point=on_point)
    memo = Memo()      # a sweep the refining round adds nothing to is not analysed again

    def analyse(records, facts, memo):
        from detect_caches.detector.analyze import detect_levels
        from detect_caches.detector.fitmap import polished_by
        with polished_by(polisher):
            return detect_levels(records, facts, memo=memo)
    beside = None
    if before_detect is not None:
        # the bandwidth sweeps are analysed while the GPU runs the latency sweep (it adds no
        # points to them): the pass after it finds them in the memo; that thread imports the
        # analysis stack (scipy, ruptures: 1-3 s) too, which on the path held back the first
        # measurement and beside the bandwidth sweeps spoilt some of their timed points
        beside = AnalysisBeside(list(session.records), device.facts, memo, analyse)
        before_detect(session)
    t = time.perf_counter()
    if beside is not None:
        beside.join()
        session.method["analysis_beside_seconds"] = round(beside.seconds, 3)
    detection = analyse(session.records, device.facts, memo)
    seconds = time.perf_counter() - t
    LOG.info("analysis of %d measurements: %s (%.2f s)", len(session.records),
             ", ".join(lv.name for lv in detection.levels), seconds)
    # more rounds where an interval is still wide and noise is what keeps it wide, at the sizes
    # the refined analysis names: on noisy, low-ratio falls it is where the first round's points
    # moved the fall (an H200's L1, wide from its aliasing dip, gained nothing but a pass); they
    # end when no interval asks, and never take what the peak probes and, after a latency sweep,
    # its sector and line probes are owed (the budget is a ceiling on the whole run)
    from detect_caches.detector.analyze import (STILL_NOISY, STILL_UNCERTAIN, UNCERTAIN, uncertain_falls)
    owed = opts.peak_budget + (LATENCY_PROBE_SHARE if any(r.sweep == "chase" for r in log.records) else 0)
    for k, (wider_than, noisier_than) in enumerate(((UNCERTAIN, 0.0),) + ((STILL_UNCERTAIN, STILL_NOISY),) * (ROUNDS - 1)):
        budget = min(REFINE_BUDGET, max(0, opts.budget - owed - len(log.records)))
        requests = uncertain_falls(detection, wider_than=wider_than, noisier_than=noisier_than, rivals=k > 0)
        if not requests and k == 0:
            continue    # no interval wide: the later rounds' rivals and contests may still ask
        if not (requests and budget and refine_intervals(session, requests, log, budget, on_point)):
            break
        LOG.info("refining %d capacity interval(s) that stayed wide", len(requests))
        t = time.perf_counter()
        detection = analyse(session.records, device.facts, memo)
        seconds += time.perf_counter() - t
    # then the falls whose capacity the points' noise alone would move between runs: every size
    # their fit reads, read PRECISION_ROUNDS more times (the sizes in turn, once a round), and one
    # analysis after them all (an analysis a round put a pass each on the run's path)
    from detect_caches.detector.precision import noisy_falls
    measured = asked = 0
    t = time.perf_counter()
    for sweep in ("shared", "private"):   # a per-SM/CU fall gets what the device falls left
        requests = noisy_falls(detection, sweep=sweep)
        asked += len(requests)
        for _ in range(PRECISION_ROUNDS if requests else 0):
            budget = min(PRECISION_BUDGET, max(0, opts.budget - owed - len(log.records)))
            got = refine_intervals(session, requests, log, budget, on_point, repeats=1) if budget else 0
            if not got:
                break
            measured += got
    if measured:
        # a part of interval_refine's measurements and seconds: the run's split names it
        session.method["precision_readings"] = {"falls": asked, "measurements": measured,
                                                "seconds": round(time.perf_counter() - t, 3)}
        LOG.info("measured %d noisy fall(s) again: %d measurements", asked, measured)
        t = time.perf_counter()
        detection = analyse(session.records, device.facts, memo)
        seconds += time.perf_counter() - t
    for lv in detection.levels:
        LOG.debug("level %s: %s", lv.name, {k: v for k, v in lv.to_dict().items() if k != "notes"})
    return session, detection, seconds


class AnalysisBeside(threading.Thread):
    """``detect(records, facts, memo)`` in a thread, for what it leaves in ``memo``: an error is
    left for the pass on the run's path to meet and report."""

    def __init__(self, records, facts, memo, detect) -> None:
        super().__init__(name="detect-caches-analysis", daemon=True)
        self.args, self.detect, self.seconds = (records, facts, memo), detect, 0.0
        self.start()

    def run(self) -> None:
        t = time.perf_counter()
        try:
            self.detect(*self.args)
        except Exception:
            pass
        self.seconds = time.perf_counter() - t


def _reach(session) -> None:
    """How far each sweep got (reports.doubt: a sweep the budget cut short)."""
    coarse = ("coarse", "refine", "check")
    for name, sw in session.method.get("sweeps", {}).items():
        sizes = [r.stream_bytes for r in session.records if r.sweep == name and r.phase in coarse and r.stream_bytes]
        sw["largest_stream_bytes"] = max(sizes, default=0)
    lat = session.method.get("latency")
    if lat:
        chains = [r.working_set_bytes for r in session.records if r.sweep == "chase" and r.phase in coarse]
        lat["largest_chain_bytes"] = max(chains, default=0)
