"""The Python API and the one path the command line takes too.

    from detect_caches import characterize, analyze, compare
    r = characterize(gpu=0, out="h200-run")          # or simulate="h200"
    r.levels[0]["capacity_bytes"], r.measurements     # result.json's content; a pandas DataFrame
    a = analyze("h200-run/measurements.csv", device="h200-run/result.json")
    compare("old/result.json", r).failed             # the check's verdict (fail_on="worse")

Measuring touches the GPU (measure/), the analysis is pure (detector/), the files are written
by reports/; nothing here measures, analyses or renders by itself.
"""
from __future__ import annotations

import dataclasses
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from detect_caches.errors import DetectCachesError, InputError
from detect_caches.pipeline.cli_log import get as _logger
from detect_caches.pipeline.result import Result
from detect_caches.pipeline.warm import _render_later, _warm_up

T0 = time.perf_counter()   # close to process start when the CLI imports this
SWITCH_INTERVAL_S = 20e-6  # the interpreter's switch interval while measuring (see _measure_and_write)
LOG = _logger("api")   # -v: each step on stderr (pipeline.cli_log)


# -- characterize ------------------------------------------------------------------------------

from detect_caches.pipeline.options import Options  # noqa: E402  (the API's name for it)


def open_device(gpu: int | None = 0, simulate: str | None = None, sim_index: int = 0):
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu < 1 << 16):
        raise InputError(f"gpu must be a GPU index (a whole number from 0), got {gpu!r:.40}")
    if simulate is not None:
        from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile
        if not isinstance(simulate, str):
            raise InputError(f"simulate must be a profile name or a profile JSON file, got {simulate!r:.40}")
        profile = load_profile(simulate)
        index = sim_index if gpu is None else gpu
        if index:   # each GPU of a simulated node is a card of its own: its own noise
            profile = dataclasses.replace(profile, seed=(profile.seed + 7919 * index) % 2**63)
        device = SimulatedGPU(profile)
        device.facts.index = index
        return device
    from detect_caches.measure.gpu.triton_gpu import TritonGPU
    return TritonGPU(0 if gpu is None else gpu)


def resolve_baseline(baseline, facts, *, force: bool = False, said: list[str] | None = None) -> dict | None:
    """The baseline of one device (reports.baseline: a result, a result.json, or a folder of runs
    searched for the latest earlier run of this GPU), checked against it before measuring. Which
    run was taken, and what the folder held that could not be read, goes to ``said``."""
    from detect_caches.reports.baseline import BaselineSource, Pick, device_of
    if isinstance(baseline, Pick):      # picked already (the command line says which before measuring)
        return dict(baseline.result, baseline_pick=baseline.how)
    source = baseline if isinstance(baseline, BaselineSource) else BaselineSource.load(baseline)
    if source is None:
        return None
    pick = source.pick(device_of(facts), force=force)
    if said is not None:
        said.append(f"baseline: {pick.how}")
        said += [f"skipped {s}" for s in source.skipped[:3]] + source.notes
    return dict(pick.result, baseline_pick=pick.how)


def characterize(gpu: int | None = 0, *, simulate: str | None = None, out=None, options: Options | None = None,
                 baseline=None, progress=None, device=None, capacity_tol=None, bandwidth_tol=None,
                 latency_tol=None, fail_on: str = "worse", force: bool = False, said: list[str] | None = None,
                 overwrite: bool = False, **kwargs) -> Result:
    """Measure one GPU (or a simulated one) and analyse it. ``out``: a new folder for the files
    (none written without it; ``overwrite=True`` replaces an earlier result there, as a notebook
    cell run again needs). ``options`` or keyword arguments: Options' fields. ``baseline``:
    see resolve_baseline, checked before anything is measured; the comparison (with the
    tolerances, written 3% or 0.03, compare's defaults when None, and ``fail_on``) is in
    ``result.data['comparison']``. ``result.doubts`` says why the result may be incomplete."""
    opts = options or Options(**kwargs)
    _analysis_installed()
    session_opts = opts.session()
    tolerances = _tolerances(capacity_tol, bandwidth_tol, latency_tol, fail_on)
    device = device or open_device(gpu, simulate)
    facts = device.facts
    LOG.info("device: %s (%s %s, %s SMs/CUs)", facts.name, facts.vendor, getattr(facts, "arch", ""),
             facts.compute_units)
    LOG.info("options: budget %d, sweeps %s, latency %s, peak probes %s, timing %s", session_opts.budget,
             ",".join(session_opts.sweeps), opts.latency, opts.peaks, session_opts.timing)
    from detect_caches.pipeline.options import check_against_device
    check_against_device(opts, facts)
    from detect_caches.measure.carveout_sweep import check_carveouts
    session_opts.carveouts = check_carveouts(device, opts.carveouts, session_opts.sweeps)
    base = resolve_baseline(baseline, facts, force=force, said=said)
    if session_opts.timing == "device":
        from detect_caches.measure.session import preflight_device_timing
        preflight_device_timing(device, session_opts)
    out_path = None
    if out is not None:
        from detect_caches.pipeline.outputs import claim_out_dir
        out_path = claim_out_dir(Path(out), overwrite=overwrite)
    try:
        return _measure_and_write(device, session_opts, out_path, base, progress,
                                  tolerances=dict(tolerances, force=force))
    finally:
        if out_path is not None:
            from detect_caches.pipeline.outputs import release
            release(out_path)


def _analysis_installed() -> None:
    """The analysis stack is imported beside the latency sweep, after the bandwidth sweeps: a
    package of it that is missing is said before anything is measured."""
    from importlib.util import find_spec
    missing = next((name for name in ("scipy", "ruptures") if find_spec(name) is None), None)
    if missing:
        raise ImportError(f"No module named {missing!r}", name=missing)


_SWITCH = {"lock": threading.Lock(), "depth": 0, "saved": 0.005}


def _measure_and_write(device, opts, out: Path | None, base: dict | None, progress, tolerances: dict) -> Result:
    t0 = time.perf_counter()
    # threads warm up imports, compile kernels and render the plot while the GPU measures: let
    # the measuring thread take the interpreter back within 20 us (not Python's 5 ms). A timed
    # launch queued late leaves the GPU idle inside the timed span; on an H200 beside a thread
    # running Python, 0.5 ms spoilt fits (re-measured points, negative slopes: 20-133 ms a point),
    # 0.1 ms did now and then, 20 us never (benchmarks/explore_queue.py; BENCHMARKS.md, 2026-11-30,
    # fifth session). The first of concurrent runs keeps the caller's setting, the last one out
    # puts it back.
    with _SWITCH["lock"]:
        if _SWITCH["depth"] == 0:
            _SWITCH["saved"] = sys.getswitchinterval()
            sys.setswitchinterval(min(_SWITCH["saved"], SWITCH_INTERVAL_S))
        _SWITCH["depth"] += 1
    try:
        return _measure_and_write_inner(device, opts, out, base, progress, tolerances, t0)
    finally:
        with _SWITCH["lock"]:
            _SWITCH["depth"] -= 1
            if _SWITCH["depth"] == 0:
                sys.setswitchinterval(_SWITCH["saved"])


def _measure_and_write_inner(device, opts, out, base, progress, tolerances: dict, t0: float) -> Result:
    from detect_caches.pipeline.fitpool import pool_for
    pool = pool_for(device.facts)       # its workers start while the GPU measures
    try:
        return _measure_and_write_pooled(device, opts, out, base, progress, tolerances, t0, pool)
    finally:
        if pool is not None:
            pool.close()


def _measure_and_write_pooled(device, opts, out, base, progress, tolerances: dict, t0: float, pool) -> Result:
    from detect_caches.records import MeasurementLog
    from detect_caches.measure.session import measure_latency, probe_latency_lines, probe_level_peaks
    warm: list[Future] = []
    log = MeasurementLog(out / "measurements.csv" if out else None)
    if hasattr(progress, "plan"):          # the bar counts the planned work, not the budget
        from detect_caches.pipeline.progress_plan import planned
        progress.plan(planned(device, opts))

    def on_point(m):
        if progress is not None:
            progress(m)
    def latency_then_warm(session):
        # the plotting stack and fonts warm up beside the latency sweep, timed by the kernel's
        # own clock, as the analysis beside it (pipeline.sweep_detect): a thread importing beside
        # the bandwidth sweeps takes the interpreter from their timed launches
        if out:
            warm.append(_warm_up())
        if opts.latency_budget:
            measure_latency(session, device, log, opts, on_point)
        t = time.perf_counter()
        try:
            if warm:
                warm[0].result(timeout=60)
        except Exception:
            pass
        # the imports and fonts the sweeps did not hide (the run's split)
        session.method["warm_up_wait_seconds"] = round(time.perf_counter() - t, 3)
    try:
        session, detection, analysis_s = sweep_and_detect(device, log, opts, on_point,
                                                          before_detect=latency_then_warm, polisher=pool)
        if pool is not None:
            session.method["fit_workers"] = pool.workers if not pool.lost else f"0 ({pool.lost})"
        from detect_caches.detector.latency import probe_targets
        plot = _render_later(detection, _title(device.facts), device.facts.vendor) if out else None
        if opts.peak_budget:
            probe_level_peaks(session, detection.levels, log, opts, on_point)
        if opts.latency_budget:
            probe_latency_lines(session, probe_targets(detection.levels), log, opts, on_point)
        if opts.carveouts:
            from detect_caches.measure.carveout_sweep import run_carveouts
            session.method["carveouts"] = run_carveouts(session, device, log, opts.carveouts,
                                                        default_l1_bytes=_l1_bytes(detection),
                                                        latency=opts.latency_budget > 0, on_point=on_point)
    except KeyboardInterrupt:
        _close(log)
        raise InputError(_kept("interrupted", log, out)) from None
    except ImportError as exc:        # the analysis stack, imported after the sweeps, broken
        _close(log)
        raise ImportError(_kept(str(exc), log, out), name=exc.name) from None
    except DetectCachesError as exc:
        _close(log)
        raise type(exc)(_kept(str(exc), log, out, ";")) from None
    except OSError as exc:            # a full disk under the measurements: name the file
        _close(log)
        raise OSError(exc.errno, _kept(exc.strerror or str(exc), log, out, ";"), exc.filename or log.path) from None
    finally:
        if progress is not None and hasattr(progress, "close"):
            progress.close()
    try:
        log.close()
        return _after_measuring(device, opts, out, base, session, detection, analysis_s, plot, tolerances, t0)
    except KeyboardInterrupt:       # a signal in the last second: the measurements are all on disk
        raise InputError(_kept("interrupted after measuring", log, out)) from None


def _close(log) -> None:
    try:
        log.close()
    except OSError:
        pass


def _kept(what: str, log, out, sep: str = ";") -> str:
    if not out:
        return what
    return (f"{what}{sep} the {len(log.records)} measurements taken are kept in {log.path} "
            f"(`detect-caches analyze` reports on them)")


def _after_measuring(device, opts, out, base, session, detection, analysis_s, plot, tolerances, t0) -> Result:
    from detect_caches.detector.latency import attach_lines
    from detect_caches.detector.peaks import attach_peaks
    # the peak, sector and line probes are not part of any curve: only their levels' figures change
    attach_peaks(detection.levels, session.records)
    attach_lines(detection.levels, session.records)
    from detect_caches.detector.carveouts import carveout_table, launch_carveout
    from detect_caches.measure.carveout_sweep import launch_shared
    if opts.carveouts:
        detection.carveouts = carveout_table(session.records, device.facts, detection.levels)
    shared = launch_shared(device, session.configs.get("private"))
    carveout = launch_carveout(shared.to_dict(device.facts) if shared else None, _l1_bytes(detection), device.facts)
    _reach(session)
    session.method["timing"] = opts.timing
    session.method["analysis_seconds"] = round(analysis_s, 3)
    # to the measuring's own start (the meter's clock, measurements.csv's t_s), not this call's:
    # what runs between them (the sweeps' set-up) is start-up in the run's split
    session.method["process_seconds_before_measuring"] = round(getattr(session.meter, "t0", t0) - T0, 3)
    if getattr(device, "startup_seconds", None):
        session.method["startup_seconds"] = device.startup_seconds
    if getattr(device, "precompile_seconds", None) is not None or getattr(device, "precompile_error", ""):
        session.method["precompile"] = {"seconds": device.precompile_seconds, "error": device.precompile_error}
    return _finish(detection, device.facts, session.records, out, base, session.method, session.warnings,
                   time.perf_counter() - t0, plot, tolerances, carveout=carveout)


def _l1_bytes(detection) -> int | None:
    """The first per-SM/CU level's capacity: the L1 the carveout is carved beside."""
    return next((lv.capacity_bytes for lv in detection.levels if lv.scope == "per_cu"), None)


def _title(facts) -> str:
    return facts.name if facts.name.startswith("simulated") or not facts.simulated else f"{facts.name} (simulated)"


def _finish(detection, facts, records, out, base, method, warnings, elapsed, plot=None,
            tolerances: dict | None = None, carveout: dict | None = None) -> Result:
    from detect_caches.reports.result_json import build_result
    t = time.perf_counter()
    data = build_result(detection, facts, measurements=len(records), elapsed_s=elapsed, method=method,
                        extra_warnings=warnings, carveout=carveout)
    if "sweeps" in method:            # a measuring run (an analysis reports on what exists)
        from detect_caches.reports.doubt import find_doubts
        data["doubts"] = find_doubts(data)
    if base is not None:
        cmp = compare(base, data, **(tolerances or {}))
        cmp.baseline_label = base.get("baseline_pick", "")
        data["comparison"] = dict(cmp.to_dict(), rows=cmp.rows, markdown=cmp.markdown())
    if out is not None:
        from detect_caches.pipeline.outputs import write_result_files
        data["method"]["write_seconds"] = round(time.perf_counter() - t, 3)
        try:
            write_result_files(out, data, detection, _title(facts), plot_future=plot)
        except InputError as exc:       # the result failed its own schema: our fault, not the user's
            raise RuntimeError(f"internal error: {exc}") from exc
    return Result(data, list(records), detection, out)


# -- analyze and compare (pipeline.api_analysis: the same path, no GPU) ----------------------

from detect_caches.pipeline.api_analysis import _tolerances, analyze, compare  # noqa: E402,F401  (the API's names)
from detect_caches.pipeline.sweep_detect import _reach, sweep_and_detect  # noqa: E402,F401
