"""A simulated GPU that answers the same timing calls as `measure.gpu.TritonGPU`.

It exists so that the sweep and the analyzer can be tested on a CPU against a known truth. It
never stands in for a hardware claim: every result it produces is marked ``simulated``.

Model: each cache level serves the fraction of loads that hit in it and missed in the faster
levels; bandwidths mix harmonically with those fractions. A level's hit rate falls with its
footprint/capacity ratio r as a cliff (``sharp``: LRU, cyclic sweep), a logistic in ln r
(``hashed``: set-hashed or physically scattered LRU; ``width`` is its scale), or the random-
replacement fixed point h = exp(-r (1 - h)) (``random``). A ``partitions: 2`` L2 serves data
beyond C/2 from a far partition at ``far_bandwidth_gbs``. ``alias_depth`` adds a deterministic,
size-dependent dip inside a transition (the set-aliasing pattern seen on real GPUs).
"""
from __future__ import annotations

import hashlib
import json
import math
import socket
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np
from scipy.special import lambertw

from measure.device import DeviceFacts
from measure.errors import DeviceError, InputError
from measure.kernel_meta import ELEM_BYTES
from measure.launch import ClockTiming, LaunchConfig
from measure.occupancy import KernelResources, check_single_wave

BUILTIN_PROFILES = ("h200", "mi300x")
SCOPES = ("per_cu", "per_xcd", "device")
TRANSITIONS = ("sharp", "hashed", "random")


@dataclass
class SimLevel:
    name: str
    bandwidth_gbs: float
    capacity_bytes: int | None = None     # None: main memory
    scope: str = "device"
    transition: str = "hashed"
    width: float = 0.05
    partitions: int = 1
    far_bandwidth_gbs: float | None = None
    alias_depth: float = 0.0

    def hit_rate(self, footprint_bytes: float) -> float:
        if self.capacity_bytes is None:
            return 1.0
        return hit_rate(footprint_bytes / self.capacity_bytes, self.transition, self.width)


def hit_rate(ratio: float, transition: str, width: float) -> float:
    """Hit rate of a cyclic sweep over ``ratio`` x the capacity."""
    if transition == "sharp":
        return 1.0 if ratio <= 1.0 else 0.0
    if transition == "random":
        if ratio <= 1.0:
            return 1.0
        return float(np.real(-lambertw(-ratio * math.exp(-ratio)) / ratio))
    z = math.log(ratio) / max(width, 1e-6)
    return 1.0 / (1.0 + math.exp(min(z, 700.0)))


@dataclass
class SimProfile:
    facts: DeviceFacts
    levels: list[SimLevel]
    noise: float = 0.02
    outlier_rate: float = 0.0
    seed: int = 1
    noise_bursts: list[dict] = field(default_factory=list)
    faults: dict = field(default_factory=dict)   # fail_after_calls, interrupt_after_calls, other_processes

    def true_capacity(self, name: str) -> int | None:
        for lv in self.levels:
            if lv.name == name:
                return lv.capacity_bytes
        return None


def _require(cond: bool, source: str, what: str) -> None:
    if not cond:
        raise InputError(f"profile {source}: {what}")


def parse_profile(data: dict, source: str = "profile") -> SimProfile:
    """Validate a profile (schema in the interface document) and build it."""
    _require(isinstance(data, dict), source, "must be a JSON object")
    vendor = data.get("vendor", "nvidia")
    _require(vendor in ("nvidia", "amd"), source, f"vendor must be nvidia or amd, got {vendor!r}")
    cus = data.get("compute_units")
    _require(isinstance(cus, int) and not isinstance(cus, bool) and cus > 0, source,
             "compute_units must be a positive integer")
    raw_levels = data.get("levels")
    _require(isinstance(raw_levels, list) and len(raw_levels) >= 2, source,
             "levels must list at least one cache and main memory")
    levels = []
    for i, lv in enumerate(raw_levels):
        where = f"level {i + 1}"
        _require(isinstance(lv, dict), source, f"{where} must be an object")
        bw = lv.get("bandwidth_gbs")
        _require(isinstance(bw, (int, float)) and not isinstance(bw, bool) and bw > 0 and math.isfinite(bw),
                 source, f"{where} needs bandwidth_gbs > 0")
        cap = lv.get("capacity_bytes")
        last = i == len(raw_levels) - 1
        if last:
            _require(cap is None, source, "the last level is main memory and has no capacity_bytes")
        else:
            _require(isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1024, source,
                     f"{where} needs an integer capacity_bytes >= 1024")
        scope = lv.get("scope", "device" if not last else "device")
        _require(scope in SCOPES, source, f"{where}: scope must be one of {', '.join(SCOPES)}")
        transition = lv.get("transition", "hashed")
        _require(transition in TRANSITIONS, source, f"{where}: transition must be one of {', '.join(TRANSITIONS)}")
        width = lv.get("width", 0.05)
        _require(isinstance(width, (int, float)) and 0 < width < 2, source, f"{where}: width must be in (0, 2)")
        parts = lv.get("partitions", 1)
        _require(parts in (1, 2), source, f"{where}: partitions must be 1 or 2")
        far = lv.get("far_bandwidth_gbs")
        _require(far is None or (isinstance(far, (int, float)) and far > 0), source,
                 f"{where}: far_bandwidth_gbs must be > 0")
        alias = lv.get("alias_depth", 0.0)
        _require(isinstance(alias, (int, float)) and 0 <= alias < 0.9, source, f"{where}: alias_depth must be in [0, 0.9)")
        levels.append(SimLevel(name=str(lv.get("name", f"level{i + 1}")), bandwidth_gbs=float(bw),
                               capacity_bytes=cap, scope=scope, transition=transition,
                               width=float(width), partitions=parts,
                               far_bandwidth_gbs=float(far) if far else None, alias_depth=float(alias)))
    bws = [lv.bandwidth_gbs for lv in levels]
    _require(all(a > b for a, b in zip(bws, bws[1:])), source, "bandwidths must fall from level to level")
    noise = data.get("noise", 0.02)
    _require(isinstance(noise, (int, float)) and 0 <= noise <= 0.5, source, "noise must be in [0, 0.5]")
    seed = data.get("seed", 1)
    _require(isinstance(seed, int) and not isinstance(seed, bool), source, "seed must be an integer")
    known = {"name", "vendor", "arch", "compute_units", "xcds", "l2_bytes_reported", "llc_bytes_reported",
             "sm_clock_max_mhz", "mem_clock_max_mhz", "memory_bus_width_bits", "total_memory_bytes",
             "memory_kind", "threads_per_cu", "registers_per_cu", "shared_bytes_per_cu", "warp_size"}
    facts = DeviceFacts.from_dict({k: v for k, v in data.items() if k in known}, source=f"profile {source}")
    facts.name = f"simulated {data.get('name', 'gpu')}"
    facts.host = socket.gethostname()
    facts.simulated = True
    facts.torch = facts.triton = ""
    if facts.total_memory_bytes is None:
        facts.total_memory_bytes = 16 * 2**30
    return SimProfile(facts=facts, levels=levels, noise=float(noise),
                      outlier_rate=float(data.get("outlier_rate", 0.0)), seed=seed,
                      noise_bursts=list(data.get("noise_bursts", [])),
                      faults={k: int(data[k]) for k in ("fail_after_calls", "interrupt_after_calls",
                                                        "other_processes") if isinstance(data.get(k), int)})


def load_profile(name_or_path: str) -> SimProfile:
    """A built-in profile by name (h200, mi300x) or a profile JSON file."""
    if name_or_path in BUILTIN_PROFILES:
        text = resources.files("measure").joinpath(f"profiles/{name_or_path}.json").read_text()
        return parse_profile(json.loads(text), source=name_or_path)
    path = Path(name_or_path)
    if not path.exists():
        raise InputError(f"no built-in profile {name_or_path!r} and no such file; built-in "
                         f"profiles: {', '.join(BUILTIN_PROFILES)}")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read profile {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"profile {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return parse_profile(data, source=str(path))


def _alias(stream_bytes: int, seed: int) -> float:
    """A deterministic pseudo-random number in [0, 1) for a size: the same at every run."""
    digest = hashlib.blake2b(f"{seed}:{stream_bytes}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") / 2**32


class SimulatedGPU:
    """Same calls as the real device; timings come from the profile's model plus noise."""

    INTERCEPT_MS = 0.006   # launch overhead and the final store

    def __init__(self, profile: SimProfile):
        self.profile = profile
        self.facts = profile.facts
        self._rng = np.random.default_rng(profile.seed)
        self.calls = 0

    def max_working_set_bytes(self) -> int:
        return int(self.facts.total_memory_bytes * 0.6)

    def sm_clock_mhz(self) -> float | None:
        return self.facts.sm_clock_max_mhz

    def bandwidth_gbs(self, config: LaunchConfig, stream_bytes: int) -> float:
        """The noiseless model bandwidth for one launch configuration and size."""
        f = self.facts
        rows = min(config.programs, f.compute_units) if config.row_by_sm else config.rows(f.compute_units)
        total = rows * stream_bytes
        per_cu = stream_bytes * (1.0 if config.row_by_sm else max(1.0, config.programs / f.compute_units))
        skip_l1 = config.load_flavour == "l2only" or (config.load_flavour == "volatile" and f.vendor == "nvidia")
        inv_bw, missing, dip = 0.0, 1.0, 1.0
        for lv in self.profile.levels:
            if lv.scope == "per_cu" and skip_l1:
                continue
            footprint = {"per_cu": per_cu, "per_xcd": total / max(f.xcds, 1)}.get(lv.scope, total)
            h = lv.hit_rate(footprint)
            served_bw = lv.bandwidth_gbs
            if lv.partitions == 2 and lv.capacity_bytes and lv.far_bandwidth_gbs:
                near = hit_rate(2 * footprint / lv.capacity_bytes, lv.transition, lv.width)
                served_bw = 1.0 / (near / lv.bandwidth_gbs + (1 - near) / lv.far_bandwidth_gbs)
            if lv.alias_depth and 0.02 < h < 0.98 or (lv.alias_depth and lv.capacity_bytes
                                                      and 0.9 < footprint / lv.capacity_bytes <= 1.0):
                dip *= 1.0 - lv.alias_depth * _alias(stream_bytes, self.profile.seed)
            inv_bw += missing * h / served_bw
            missing *= 1.0 - h
        return dip / inv_bw

    def other_processes(self) -> int | None:
        return self.profile.faults.get("other_processes", 0)

    def _inject_faults(self) -> None:
        """Faults a profile asks for, to test what a live run does with them."""
        faults = self.profile.faults
        if self.calls >= faults.get("fail_after_calls", 1 << 62):
            raise DeviceError("a kernel launch failed: simulated fault (fail_after_calls)")
        if self.calls >= faults.get("interrupt_after_calls", 1 << 62):
            raise KeyboardInterrupt

    def _noise_now(self) -> float:
        self._inject_faults()
        noise = self.profile.noise
        for burst in self.profile.noise_bursts:
            start = int(burst.get("after_calls", 0))
            if start <= self.calls < start + int(burst.get("calls", 0)):
                noise = max(noise, float(burst.get("noise", 0.2)))
        return noise

    def _pass_ns(self, config: LaunchConfig, stream_elems: int) -> tuple[float, float]:
        """One pass over every row (ns), with this call's point error, and the noise level now."""
        stream_bytes = stream_elems * ELEM_BYTES
        bw = self.bandwidth_gbs(config, stream_bytes)
        noise = self._noise_now()
        self.calls += 1
        point_factor = math.exp(self._rng.normal(0.0, noise))
        if self._rng.random() < self.profile.outlier_rate:
            point_factor *= 1.6
        return config.programs * stream_bytes / bw * point_factor, noise

    def time_launches(self, config: LaunchConfig, stream_elems: int,
                      load_iters: Sequence[int], repeats: int) -> np.ndarray:
        pass_ns, noise = self._pass_ns(config, stream_elems)
        pass_ms = pass_ns / 1e6
        iters = np.asarray(load_iters, dtype=float)[:, None]
        jitter = self._rng.normal(0.0, 0.0004, size=(len(load_iters), repeats))
        per_launch = 1.0 + self._rng.normal(0.0, noise / 4, size=(len(load_iters), repeats))
        ms = self.INTERCEPT_MS + iters * pass_ms * per_launch + np.abs(jitter)
        if noise > self.profile.noise:
            # a busy GPU time-slices: some launches wait behind another process's kernels
            waits = self._rng.random(ms.shape) < 0.5
            ms = ms + waits * self._rng.uniform(0.0, 0.6, ms.shape) * ms.max()
        return ms

    def time_in_kernel(self, config: LaunchConfig, stream_elems: int, warm_iters: int,
                       load_iters: int, repeats: int) -> ClockTiming:
        per_cu = check_single_wave(self.facts, config.programs, self.kernel_resources(config.num_warps))
        pass_ns, noise = self._pass_ns(config, stream_elems)
        phase_ns = load_iters * pass_ns
        per_launch = 1.0 + np.abs(self._rng.normal(0.0, noise / 4, size=repeats))
        # the clock ticks every 32 ns; programs of one wave start within about a microsecond
        longest = np.round(phase_ns * per_launch / 32.0) * 32.0
        spread = np.abs(self._rng.normal(800.0, 200.0, size=repeats))
        return ClockTiming(longest, spread, per_cu, "simulated 32 ns clock")

    @staticmethod
    def kernel_resources(num_warps: int) -> KernelResources:
        """What the simulated kernel needs per program (40 registers/thread, as on sm_90)."""
        return KernelResources(num_warps, registers_per_thread=40, shared_bytes=0)
