"""The Python API and the one path the command line takes too.

    from detect_caches import characterize, analyze, compare
    r = characterize(gpu=0, out="h200-run")          # or simulate="h200"
    r.levels[0]["capacity_bytes"], r.measurements     # result.json's content; a pandas DataFrame
    a = analyze("h200-run/measurements.csv", device="h200-run/result.json")
    compare("old/result.json", r).drift

Measuring touches the GPU (measure/), the analysis is pure (detector/), the files are written
by reports/; nothing here measures, analyses or renders by itself.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from measure.errors import DetectCachesError, InputError

T0 = time.perf_counter()   # close to process start when the CLI imports this
SWITCH_INTERVAL_S = 20e-6  # the interpreter's switch interval while measuring (see _measure_and_write)


@dataclass
class Result:
    """What a run or an analysis produced: ``data`` is result.json's content."""

    data: dict
    records: list = field(default_factory=list, repr=False)
    detection: object = field(default=None, repr=False)
    out: Path | None = None

    def __getitem__(self, key):
        return self.data[key]

    @property
    def levels(self) -> list[dict]:
        return self.data["levels"]

    @property
    def device(self) -> dict:
        return self.data["device"]

    @property
    def warnings(self) -> list[str]:
        return self.data.get("warnings", [])

    def level(self, name: str) -> dict:
        found = [lv for lv in self.levels if lv["name"] == name]
        if not found:
            raise KeyError(f"no level {name!r}; the levels are {', '.join(lv['name'] for lv in self.levels)}")
        return found[0]

    @property
    def measurements(self):
        """Every measurement as a pandas DataFrame, one row per measured point."""
        import pandas as pd
        from measure.records import COLUMNS
        return pd.DataFrame([dataclasses.asdict(r) for r in self.records], columns=COLUMNS)

    def to_json(self) -> str:
        from reports.result_json import dumps
        return dumps(self.data)


# -- warming up what the end of the run needs, while the GPU measures ----------------------------

def _warm_up() -> Future:
    """Import the analysis and plotting stacks and set up matplotlib's fonts in a thread, while
    the GPU measures (the main thread waits on the GPU with the GIL released)."""
    fut: Future = Future()

    def work():
        try:
            import detector.analyze  # noqa: F401  (scipy, ruptures)
            from reports.plot import warm_fonts
            warm_fonts()
            fut.set_result(True)
        except BaseException as exc:   # the main thread imports again and reports it
            fut.set_exception(exc)
    threading.Thread(target=work, name="detect-caches-warm-up", daemon=True).start()
    return fut


def _render_later(detection, title: str) -> Future:
    """The plot, rendered in a thread while the probes run (they add no points to its curves)."""
    fut: Future = Future()

    def work():
        try:
            from reports.plot import render_plot
            fut.set_result(render_plot(detection, title))
        except BaseException as exc:
            fut.set_exception(exc)
    threading.Thread(target=work, name="detect-caches-plot", daemon=True).start()
    return fut


# -- characterize ------------------------------------------------------------------------------

@dataclass
class Options:
    """How to measure (the command line's options, with its defaults)."""

    budget: int = 400
    latency: bool = True
    peaks: bool = True
    timing: str = "events"
    sweeps: tuple[str, ...] = ("private", "shared")
    grid_multiplier: int = 4
    max_working_set_bytes: int | None = None
    carveouts: str | None = None     # "all" or KiB such as "0,32,100,228": the L1 under each (NVIDIA)

    def session(self):
        from measure.session import SessionOptions
        if self.timing not in ("events", "device"):
            raise InputError(f"timing must be events or device, got {self.timing!r}")
        if not self.sweeps or any(s not in ("private", "shared") for s in self.sweeps):
            raise InputError(f"sweeps take private, shared or both, got {self.sweeps!r}")
        if self.max_working_set_bytes is not None and self.max_working_set_bytes < 16 << 20:
            raise InputError("the largest working set must be at least 16 MiB (--max-working-set 16)")
        if self.budget < 20:
            raise InputError(f"a budget of {self.budget} measurements is too small to find levels (at least 60)")
        return SessionOptions(sweeps=tuple(self.sweeps), grid_multiplier=self.grid_multiplier, budget=self.budget,
                              max_working_set_bytes=self.max_working_set_bytes, timing=self.timing,
                              peak_budget=min(24, self.budget // 5) if self.peaks else 0,
                              latency_budget=min(84, self.budget // 4) if self.latency else 0)


def open_device(gpu: int | None = 0, simulate: str | None = None, sim_index: int = 0):
    if simulate is not None:
        from measure.simulated import SimulatedGPU, load_profile
        profile = load_profile(simulate)
        index = sim_index if gpu is None else gpu
        if index:   # each GPU of a simulated node is a card of its own: its own noise
            profile = dataclasses.replace(profile, seed=(profile.seed + 7919 * index) % 2**63)
        device = SimulatedGPU(profile)
        device.facts.index = index
        return device
    from measure.gpu import TritonGPU
    return TritonGPU(0 if gpu is None else gpu)


def resolve_baseline(baseline, facts) -> dict | None:
    """A result.json (file or folder holding one), or a folder of runs: the latest earlier run of
    the same GPU (by UUID), else of the same model. Checked against the device before measuring."""
    if baseline is None:
        return None
    from reports.compare import check_comparable
    from reports.result_json import read_result
    if isinstance(baseline, (dict, Result)):
        base = baseline.data if isinstance(baseline, Result) else baseline
    else:
        path = Path(baseline)
        if path.is_dir() and not (path / "result.json").exists():
            from reports.history import latest_before
            picked = latest_before([path], facts.uuid, facts.name)
            if picked is None:
                raise InputError(f"{path} holds no earlier result of a {facts.name}")
            base = picked[1]
        else:
            base = read_result(path)
    check_comparable(base, {"device": {"name": facts.name}})
    return base


def characterize(gpu: int | None = 0, *, simulate: str | None = None, out=None, options: Options | None = None,
                 baseline=None, progress=None, device=None, capacity_tol: float | None = None,
                 bandwidth_tol: float | None = None, **kwargs) -> Result:
    """Measure one GPU (or a simulated one) and analyse it. ``out``: a new folder for the files
    (none written without it). ``options`` or keyword arguments: Options' fields. ``baseline``:
    see resolve_baseline; the comparison (with ``capacity_tol``/``bandwidth_tol``, compare's
    defaults when None) is in ``result.data['comparison']``."""
    opts = options or Options(**kwargs)
    session_opts = opts.session()
    device = device or open_device(gpu, simulate)
    facts = device.facts
    from measure.carveout_sweep import check_carveouts
    session_opts.carveouts = check_carveouts(device, opts.carveouts, session_opts.sweeps)
    base = resolve_baseline(baseline, facts)
    if session_opts.timing == "device":
        from measure.session import preflight_device_timing
        preflight_device_timing(device, session_opts)
    out_path = None
    if out is not None:
        from pipeline.outputs import claim_out_dir
        out_path = claim_out_dir(Path(out))
    try:
        return _measure_and_write(device, session_opts, out_path, base, progress,
                                  tolerances=dict(capacity_tol=capacity_tol, bandwidth_tol=bandwidth_tol))
    finally:
        if out_path is not None:
            from pipeline.outputs import release
            release(out_path)


def _measure_and_write(device, opts, out: Path | None, base: dict | None, progress, tolerances: dict) -> Result:
    t0 = time.perf_counter()
    # threads warm up imports, compile kernels and render the plot while the GPU measures: let
    # the measuring thread take the interpreter back within 20 us (not Python's 5 ms). A timed
    # launch queued late leaves the GPU idle inside the timed span; on an H200 beside a thread
    # running Python, 0.5 ms spoilt fits (re-measured points, negative slopes: 20-133 ms a point
    # where 6-9 ms do), 0.1 ms did now and then, 20 us never (benchmarks/explore_queue.py)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, SWITCH_INTERVAL_S))
    try:
        return _measure_and_write_inner(device, opts, out, base, progress, tolerances, t0)
    finally:
        sys.setswitchinterval(switch)


def _measure_and_write_inner(device, opts, out, base, progress, tolerances: dict, t0: float) -> Result:
    from measure.records import MeasurementLog
    from measure.session import measure_latency, probe_latency_lines, probe_level_peaks
    warm: list[Future] = []
    log = MeasurementLog(out / "measurements.csv" if out else None)

    def on_point(m):
        # imports and fonts warm up once the first point is in: the first launch (Triton's set-up)
        # runs alone, on the path to everything else
        if not warm:
            warm.append(_warm_up())
        if progress is not None:
            progress(m)
    def latency_then_warm(session):
        if opts.latency_budget:
            measure_latency(session, device, log, opts, on_point)
        try:
            if warm:
                warm[0].result(timeout=60)
        except Exception:
            pass
    try:
        session, detection, analysis_s = sweep_and_detect(device, log, opts, on_point,
                                                          before_detect=latency_then_warm)
        from detector.latency import attach_lines, probe_targets
        from detector.peaks import attach_peaks
        plot = _render_later(detection, _title(device.facts)) if out else None
        if opts.peak_budget:
            probe_level_peaks(session, detection.levels, log, opts, on_point)
        if opts.latency_budget:
            probe_latency_lines(session, probe_targets(detection.levels), log, opts, on_point)
        if opts.carveouts:
            from measure.carveout_sweep import run_carveouts
            session.method["carveouts"] = run_carveouts(session, device, log, opts.carveouts,
                                                        default_l1_bytes=_l1_bytes(detection),
                                                        latency=opts.latency_budget > 0, on_point=on_point)
    except KeyboardInterrupt:
        log.close()
        raise InputError(f"interrupted; the {len(log.records)} measurements taken are kept in "
                         f"{log.path} (`detect-caches analyze` reports on them)" if out else "interrupted") from None
    except DetectCachesError as exc:
        log.close()
        kept = f"; the {len(log.records)} measurements taken are kept in {log.path}" if out else ""
        raise type(exc)(f"{exc}{kept}") from None
    finally:
        if progress is not None and hasattr(progress, "close"):
            progress.close()
    log.close()
    # the peak, sector and line probes are not part of any curve: only their levels' figures change
    attach_peaks(detection.levels, session.records)
    attach_lines(detection.levels, session.records)
    from detector.carveouts import carveout_table, launch_carveout
    from measure.carveout_sweep import launch_shared
    if opts.carveouts:
        detection.carveouts = carveout_table(session.records, device.facts, detection.levels)
    shared = launch_shared(device, session.configs.get("private"))
    carveout = launch_carveout(shared.to_dict(device.facts) if shared else None, _l1_bytes(detection), device.facts)
    session.method["timing"] = opts.timing
    session.method["analysis_seconds"] = round(analysis_s, 3)
    session.method["process_seconds_before_measuring"] = round(t0 - T0, 3)
    if getattr(device, "startup_seconds", None):
        session.method["startup_seconds"] = device.startup_seconds
    if getattr(device, "precompile_seconds", None) is not None or getattr(device, "precompile_error", ""):
        session.method["precompile"] = {"seconds": device.precompile_seconds, "error": device.precompile_error}
    return _finish(detection, device.facts, session.records, out, base, session.method, session.warnings,
                   time.perf_counter() - t0, plot, tolerances, carveout=carveout)


def _l1_bytes(detection) -> int | None:
    """The first per-SM/CU level's capacity: the L1 the carveout is carved beside."""
    return next((lv.capacity_bytes for lv in detection.levels if lv.scope == "per_cu"), None)


REFINE_BUDGET = 48   # measurements each round for the capacities the analysis left uncertain
REFINE_ROUNDS = 4


def sweep_and_detect(device, log, opts, on_point=None, *, before_detect=None):
    """The sweeps, the analysis, then more points inside each capacity interval the analysis left
    wide and the analysis again: (session, detection, analysis seconds). ``before_detect`` runs
    once the sweeps are done (the latency sweep: its points are analysed with the rest)."""
    from detector.analyze import detect_levels, uncertain_falls
    from measure.session import characterize as sweep, refine_intervals
    session = sweep(device, log, opts, on_point=on_point)
    if before_detect is not None:
        before_detect(session)
    t = time.perf_counter()
    detection = detect_levels(session.records, device.facts)
    seconds = time.perf_counter() - t
    for _ in range(REFINE_ROUNDS):
        budget = min(REFINE_BUDGET, max(0, opts.budget - opts.peak_budget - len(log.records)))
        requests = uncertain_falls(detection)
        if not (requests and budget and refine_intervals(session, requests, log, budget, on_point)):
            break
        t = time.perf_counter()
        detection = detect_levels(session.records, device.facts)
        seconds += time.perf_counter() - t
    return session, detection, seconds


def _title(facts) -> str:
    return facts.name if facts.name.startswith("simulated") or not facts.simulated else f"{facts.name} (simulated)"


def _finish(detection, facts, records, out, base, method, warnings, elapsed, plot=None,
            tolerances: dict | None = None, carveout: dict | None = None) -> Result:
    from reports.result_json import build_result
    t = time.perf_counter()
    data = build_result(detection, facts, measurements=len(records), elapsed_s=elapsed, method=method,
                        extra_warnings=warnings, carveout=carveout)
    if base is not None:
        cmp = compare(base, data, **(tolerances or {}))
        data["comparison"] = {"drift": cmp.drift, "rows": cmp.rows, "environment": cmp.environment,
                              "explained": cmp.explained,
                              "markdown": cmp.markdown()}
    if out is not None:
        from pipeline.outputs import write_result_files
        data["method"]["write_seconds"] = round(time.perf_counter() - t, 3)
        try:
            write_result_files(out, data, detection, _title(facts), plot_future=plot)
        except InputError as exc:       # the result failed its own schema: our fault, not the user's
            raise RuntimeError(f"internal error: {exc}") from exc
    return Result(data, list(records), detection, out)


# -- analyze and compare -----------------------------------------------------------------------

def _facts(device, vendor: str | None, name: str):
    from measure.device import DeviceFacts, load_device_json
    if device is None:
        facts = DeviceFacts(name=name)
    elif isinstance(device, DeviceFacts):
        facts = device
    elif isinstance(device, dict):
        data = device.get("device", device) if isinstance(device.get("device"), dict) else device
        facts = DeviceFacts.from_dict(data, source="device")
    else:
        facts = load_device_json(device)
    if vendor:
        if vendor not in ("nvidia", "amd"):
            raise InputError(f"vendor must be nvidia or amd, got {vendor!r}")
        facts.vendor = vendor
    return facts


def analyze(measurements, device=None, *, vendor: str | None = None, out=None) -> Result:
    """Detection and reports on recorded measurements: a measurements.csv path or a pandas
    DataFrame with its columns. ``device``: what --device-json holds (a dict or a path; a
    result.json works too). No GPU, no torch."""
    from measure.reader import read_measurements, records_from_rows
    t0 = time.perf_counter()
    warnings: list[str] = []
    if hasattr(measurements, "to_dict") and hasattr(measurements, "columns"):
        records = records_from_rows(measurements.to_dict("records"), "the DataFrame")
        source, name = "DataFrame", "measurements"
    else:
        records = read_measurements(measurements, warnings)
        source, name = str(measurements), Path(measurements).stem
    facts = _facts(device, vendor, name)
    out_path = None
    if out is not None:
        from pipeline.outputs import claim_out_dir
        out_path = claim_out_dir(Path(out))
    try:
        from detector.analyze import detect_levels
        from detector.carveouts import launch_carveout, recorded_launch
        from reports.carveout_json import recorded_launch_of
        detection = detect_levels(records, facts)
        carveout = launch_carveout(recorded_launch_of(device) or recorded_launch(records, facts),
                                   _l1_bytes(detection), facts)
        return _finish(detection, facts, records, out_path, None, {"source": source}, warnings,
                       time.perf_counter() - t0, carveout=carveout)
    finally:
        if out_path is not None:
            from pipeline.outputs import release
            release(out_path)


def _as_result(x) -> dict:
    from reports.result_json import read_result, validate_result
    if isinstance(x, Result):
        return x.data
    if isinstance(x, dict):
        return validate_result(json.loads(json.dumps(x, default=str)), "the result")
    return read_result(x)


def compare(baseline, current, *, capacity_tol: float | None = None, bandwidth_tol: float | None = None,
            force: bool = False):
    """Regression check of ``current`` against ``baseline`` (Results, dicts or result.json paths):
    a reports.compare.Comparison (``.drift``, ``.rows``, ``.markdown()``)."""
    from reports.compare import DEFAULT_BANDWIDTH_TOL, DEFAULT_CAPACITY_TOL, check_comparable, compare_results
    base, cur = _as_result(baseline), _as_result(current)
    check_comparable(base, cur, force=force)
    return compare_results(base, cur, capacity_tol=DEFAULT_CAPACITY_TOL if capacity_tol is None else capacity_tol,
                           bandwidth_tol=DEFAULT_BANDWIDTH_TOL if bandwidth_tol is None else bandwidth_tol)
