"""A full characterization: plan both sweeps for a device, run them, log every point."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field


from detect_caches.device import DeviceFacts
from detect_caches.measure.kernel_meta import COARSE_BYTES
from detect_caches.measure.launch import LaunchConfig, TimingDevice
from detect_caches.measure.peak import PeakTarget, probe_peaks
from detect_caches.measure.point import PointMeter, PointPolicy
from detect_caches.records import Measurement, MeasurementLog
from detect_caches.measure.sweep import AdaptiveSweep, SweepPlan


@dataclass
class SessionOptions:
    sweeps: tuple[str, ...] = ("private", "shared")
    grid_multiplier: int = 4
    private_block_size: int = 2048
    private_num_warps: int = 4
    private_programs_per_cu: int = 4   # NVIDIA: rows follow SM ids, so this does not blur the knee
    shared_block_size: int = 1024
    shared_num_warps: int = 8
    budget: int = 800                 # measurements over the sweeps, the peak and the latency probes
                                      # (pipeline.options.DEFAULT_BUDGET: the command line's default)
    peak_budget: int = 24             # of which the peak probes may take this many
    latency_budget: int = 84          # ... and the latency sweep and its probes this many (0: none)
    timing: str = "events"            # "events" (regression) or "device" (in-kernel clock)
    max_working_set_bytes: int | None = None
    points_per_octave: int = 4
    carveouts: tuple[int, ...] = ()   # the L1 again under each of these carveouts (KiB), after the run


@dataclass
class SessionReport:
    records: list[Measurement]
    method: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    meter: PointMeter | None = None
    configs: dict[str, LaunchConfig] = field(default_factory=dict)   # each sweep's launch
    latency_meter: object = None      # measure.latency.LatencyMeter, once the chase has run
    plans: dict[str, SweepPlan] = field(default_factory=dict)   # each sweep's plan (the carveout sweeps start from it)


def _largest_cache(facts: DeviceFacts) -> int:
    l2 = (facts.l2_bytes_reported or 64 * 2**20) * (facts.xcds if facts.vendor == "amd" else 1)
    return max(l2, facts.llc_bytes_reported or 0)


def plan_sweeps(facts: DeviceFacts, opts: SessionOptions, memory_cap: int) -> tuple[list[SweepPlan], list[str]]:
    warnings = []
    cus = facts.compute_units
    plans = []
    sweep_budget = max(opts.budget - opts.peak_budget - opts.latency_budget, 2 * len(opts.sweeps))
    share = sweep_budget // max(len(opts.sweeps), 1)
    if "private" in opts.sweeps:
        # NVIDIA: 4 programs per SM, every program streams the row of the SM it runs on (%smid):
        # enough loads in flight for the L1 ceiling, and one row per SM in its L1. One buffer
        # read by every program was tried on an H200: the 4 programs of an SM then reuse each
        # other's lines past the capacity (cheap misses), moving the L1 cliff from 221 to 254 KiB
        # (commit ebf9dc9) while a one-SM latency chase still shows the L1's own size. AMD (no
        # SM id): one program per CU. The far end passes the L2 (every SM's rows together): the
        # analysis keeps a plateau at the shared sweep's L2 speed there as the L2, short or not.
        by_sm = facts.vendor == "nvidia"
        cfg = LaunchConfig("private", cus * (opts.private_programs_per_cu if by_sm else 1),
                           opts.private_block_size, opts.private_num_warps, 1, "cached", by_sm)
        hi = max(1 << 20, 2 * _largest_cache(facts) // cus)
        hi = min(hi, memory_cap // cus)
        plans.append(SweepPlan(cfg, 8 * COARSE_BYTES, hi // COARSE_BYTES * COARSE_BYTES,
                               opts.points_per_octave, share, scan_step=0.0025))
    if "shared" in opts.sweeps:
        programs = cus * opts.grid_multiplier
        cfg = LaunchConfig("shared", programs, opts.shared_block_size, opts.shared_num_warps, 1, "l2only")
        # past every documented cache, and at least 2 GiB: a cache no document names (AMD's
        # Infinity Cache on an unknown part) must show its fall and memory past it
        want = max(16 * _largest_cache(facts), 2 << 30)
        cap = min(want, memory_cap)
        if cap < want:
            by_option = bool(opts.max_working_set_bytes) and cap >= opts.max_working_set_bytes
            why = "--max-working-set allows" if by_option else "the free device memory allows"
            warnings.append(f"the shared sweep stops at {cap / 2**20:.0f} MiB, {why} no more "
                            f"(wanted {want / 2**20:.0f} MiB)")
        # tiny per-program streams are loop-overhead bound; start at 1/16 of the L2
        lo = max(4 * COARSE_BYTES, (facts.l2_bytes_reported or 0) // 16 // programs // COARSE_BYTES * COARSE_BYTES)
        cache_speed = facts.faster_than_memory_gbs()
        plans.append(SweepPlan(cfg, lo, cap // programs // COARSE_BYTES * COARSE_BYTES,
                               opts.points_per_octave, sweep_budget - share * (len(plans)),
                               extend_stream_bytes=memory_cap // programs // COARSE_BYTES * COARSE_BYTES,
                               memory_ceiling_log=math.log10(cache_speed) if cache_speed else None))
    return plans, warnings


def _after_first(on_point, start):
    """``on_point`` that also calls ``start()`` once, after the first measurement."""
    started = []

    def hook(m):
        if not started:
            started.append(True)
            start()
        if on_point is not None:
            on_point(m)
    return hook


def characterize(device: TimingDevice, log: MeasurementLog, opts: SessionOptions,
                 policy: PointPolicy | None = None, on_point=None) -> SessionReport:
    memory_cap = device.max_working_set_bytes()
    if opts.max_working_set_bytes:
        memory_cap = min(memory_cap, opts.max_working_set_bytes)
    plans, warnings = plan_sweeps(device.facts, opts, memory_cap)
    meter = PointMeter(device, policy or PointPolicy(timing=opts.timing))
    precompile = getattr(device, "precompile", None)
    if precompile is not None and opts.timing == "events":
        from detect_caches.measure.peak import all_candidates
        bases = {p.config.sweep: p.config for p in plans}
        # the first sweep's launch compiles on its own; the rest in the background once the first
        # point is in (its first launch, which sets up Triton, runs alone: it is on the path)
        later = [p.config for p in plans if p.config.sweep != "shared"] if len(plans) > 1 else []
        on_point = _after_first(on_point, lambda: precompile(
            later + (all_candidates(device.facts, bases) if opts.peak_budget else []), chase=opts.latency_budget > 0))
    busy = [device.other_processes()]
    method: dict = {"sweeps": {}, "sm_clock_seen_mhz": []}
    known: tuple[float, ...] = ()
    # the shared sweep first: its first plateau (the device's L2 speed) is a level the private
    # sweep's falls may pass through, so the private sweep refines around it too
    for plan in sorted(plans, key=lambda p: p.config.sweep != "shared"):
        t = time.perf_counter()
        clock_before = device.sm_clock_mhz()
        if plan.config.sweep == "private":
            plan.known_levels = known
        sweep = AdaptiveSweep(meter, plan, log, on_point)
        sweep.run()
        if plan.config.sweep == "shared":
            known = sweep.first_level()
        clock_after = device.sm_clock_mhz()
        n = sum(1 for r in log.records if r.sweep == plan.config.sweep)
        method["sweeps"][plan.config.sweep] = dict(plan.config.to_dict(), measurements=n,
                                                   seconds=round(time.perf_counter() - t, 3),
                                                   min_stream_bytes=plan.min_stream_bytes,
                                                   max_stream_bytes=plan.max_stream_bytes)
        method["sm_clock_seen_mhz"] += [c for c in (clock_before, clock_after) if c]
    busy.append(device.other_processes())
    method["compile_seconds"] = round(getattr(device, "compile_seconds", 0.0), 3)
    if any(busy):
        warnings.append(f"{max(b or 0 for b in busy)} other process(es) used the GPU during the run; their "
                        f"work interleaves with the measurements (re-run on an idle GPU for reference figures)")
    seen = [r.sm_clock_mhz for r in log.records if r.sm_clock_mhz == r.sm_clock_mhz]
    if seen:
        method["sm_clock_seen_mhz"] = [min(seen), max(seen)]
    rejected = [r for r in log.records if "above_ceiling" in r.flag_set]
    if rejected:
        warnings.append(f"{len(rejected)} measurement(s) exceeded the physical ceiling and were rejected "
                        f"as broken (kept in measurements.csv, flagged above_ceiling)")
    poor = [r for r in log.records if r.flag_set & {"poor_r2", "noisy"}]
    if poor:
        what = ("kept a poor regression fit" if opts.timing == "events" else "kept a wide spread of repeats")
        warnings.append(f"{len(poor)} measurement(s) {what} after re-measuring; the levels they touch "
                        f"have lower confidence")
        if len(poor) > 0.1 * len(log.records):
            warnings.append(f"{len(poor) / len(log.records):.0%} of the measurements were noisy: the GPU looks "
                            f"busy or unstable; treat capacities and bandwidths as approximate")
    skipped = [r for r in log.records if "not_one_wave" in r.flag_set]
    if skipped:
        warnings.append(f"{len(skipped)} in-kernel timed measurement(s) had programs that never met at the grid "
                        f"barrier (not one wave); they were rejected")
    sm_max = device.facts.sm_clock_max_mhz
    if seen and sm_max and min(seen) < 0.85 * sm_max:
        warnings.append(f"the SM clock dropped to {min(seen):.0f} MHz during the run (max {sm_max:.0f} MHz): "
                        f"throttling or power capping; bandwidths may be low")
    return SessionReport(log.records, method, warnings, meter, {p.config.sweep: p.config for p in plans},
                         plans={p.config.sweep: p for p in plans})


def probe_level_peaks(session: SessionReport, levels, log: MeasurementLog, opts: SessionOptions,
                      on_point=None) -> int:
    """The peak probes for detected levels (plain data from the detector: name, sweep, plateau)."""
    targets = [PeakTarget(lv.name, lv.sweep, lv.plateau_lo_bytes, lv.plateau_hi_bytes,
                          memory=lv.capacity_bytes is None and lv.scope == "device")
               for lv in levels if lv.plateau_lo_bytes and lv.plateau_hi_bytes]
    budget = max(0, min(opts.peak_budget, opts.budget - len(log.records)))
    t = time.perf_counter()
    n = probe_peaks(session.meter, targets, session.configs, log, budget, on_point)
    session.method["peak_probes"] = {"measurements": n, "seconds": round(time.perf_counter() - t, 3)}
    session.records = log.records
    return n


REFINE_REPEATS = 2        # each size an uncertain capacity asks for measured this many times


def _shares(needs: list[int], budget: int) -> list[int]:
    """Each request's share of ``budget``: the smallest needs served whole first, the rest split
    evenly among the larger ones (a capacity asking for many sizes does not take the points of
    one asking for few, and no budget is left while a request still wants more)."""
    shares = [0] * len(needs)
    left, waiting = budget, sorted(range(len(needs)), key=lambda k: needs[k])
    while waiting:
        k = waiting.pop(0)
        shares[k] = min(needs[k], left // (len(waiting) + 1))
        left -= shares[k]
    return shares


def refine_intervals(session: SessionReport, requests, log: MeasurementLog, budget: int, on_point=None,
                     repeats: int = REFINE_REPEATS) -> int:
    """Measure again where a capacity is still uncertain (plain data from the detector: sweep
    name and the sizes, in that sweep's x units, where more readings tell most), each size
    ``repeats`` times within the request's share of ``budget`` (_shares; smallest size first,
    each repeated before the next); the analysis runs again on every point. Returns the count."""
    from detect_caches.measure.kernel_meta import round_to_granule
    meter = session.meter
    plans = []
    for sweep, xs in requests:
        config = session.configs.get(sweep)
        if config is None or meter is None:
            continue
        rows = 1 if sweep == "private" else config.rows(meter.device.facts.compute_units)
        sizes = sorted({round_to_granule(x / rows) for x in xs if x > 0})
        plans.append((config, [size for size in sizes for _ in range(repeats)]))
    used, t = 0, time.perf_counter()
    for (config, sizes), share in zip(plans, _shares([len(p[1]) for p in plans], budget)):
        for size in sizes[:share]:
            m = meter.measure(config, size, phase="refine")
            log.append(m)
            used += 1
            if on_point is not None:
                on_point(m)
    session.records = log.records
    # measuring time only (the analyses between rounds count as analysis): the run's split
    done = session.method.get("interval_refine", {})
    session.method["interval_refine"] = {"measurements": done.get("measurements", 0) + used,
                                         "seconds": round(done.get("seconds", 0.0) + time.perf_counter() - t, 3)}
    return used


LATENCY_PROBE_SHARE = 21   # of the latency budget, kept for the sector and line probes (16 chases,
                           # and the L2's stride probe: measure.transfer.STRIDES_BYTES)


def measure_latency(session: SessionReport, device: TimingDevice, log: MeasurementLog, opts: SessionOptions,
                    on_point=None) -> int:
    """The dense pointer chase (measure.latency); the probes follow once levels are known."""
    from detect_caches.measure.latency import LatencyMeter, plan_latency, run_latency_sweep
    if opts.latency_budget <= 0:
        return 0
    memory_cap = device.max_working_set_bytes()
    if opts.max_working_set_bytes:
        memory_cap = min(memory_cap, opts.max_working_set_bytes)
    t = time.perf_counter()
    meter = LatencyMeter(device, t0=session.meter.t0 if session.meter else None)
    plan = plan_latency(device.facts, memory_cap, max(opts.latency_budget - LATENCY_PROBE_SHARE, 10))
    n = len(run_latency_sweep(meter, plan, log, on_point))
    session.latency_meter = meter
    session.method["latency"] = {"measurements": n, "seconds": round(time.perf_counter() - t, 3),
                                 "max_chain_bytes": plan.max_bytes}
    session.records = log.records
    return n


def probe_latency_lines(session: SessionReport, targets, log: MeasurementLog, opts: SessionOptions,
                        on_point=None) -> int:
    """Sector and line probes for the levels the latency sweep matched (plain data from the
    detector: name, chain bytes at the knee, skip L1, walk cold)."""
    from detect_caches.measure.latency import ProbeTarget, run_probes
    if session.latency_meter is None or not targets:
        return 0
    from detect_caches.measure.transfer import STRIDES_BYTES, run_transfer_probes
    t = time.perf_counter()
    probes = [ProbeTarget(name, size, l2only, cold) for name, size, l2only, cold in targets]
    n = run_probes(session.latency_meter, probes, log, LATENCY_PROBE_SHARE - len(STRIDES_BYTES), on_point)
    # the unit the first level past the L1 hands to the SMs, by stride bandwidth (measure.transfer)
    past_l1 = [(name, size) for name, size, l2only, _cold in targets if l2only][:1]
    if past_l1 and hasattr(session.latency_meter.device, "time_strided"):
        n += run_transfer_probes(session.latency_meter.device, past_l1, log, len(STRIDES_BYTES),
                                 t0=session.latency_meter.t0, on_point=on_point)
    session.method.setdefault("latency", {})["probe_measurements"] = n
    session.method["latency"]["probe_seconds"] = round(time.perf_counter() - t, 3)
    session.records = log.records
    return n


def preflight_device_timing(device: TimingDevice, opts: SessionOptions) -> None:
    """In-kernel timing needs every program of a launch resident at once: check each sweep's
    launch before the first measurement (not after eighty)."""
    memory_cap = device.max_working_set_bytes()
    plans, _ = plan_sweeps(device.facts, opts, memory_cap)
    for plan in plans:
        check = getattr(device, "check_single_wave", None)
        if check is not None:
            check(plan.config)
