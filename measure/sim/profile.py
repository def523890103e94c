"""Simulated-GPU profiles: the JSON schema of the interface document, validated field by field,
and the built-in profiles (published figures and the reference cards' measured shapes)."""
from __future__ import annotations

import dataclasses
import json
import socket
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from detect_caches.device import DeviceFacts
from detect_caches.errors import InputError
from detect_caches.safe_read import read_json_bounded
from detect_caches.measure.sim.model import TRANSITIONS, SimLevel
from detect_caches.validate import number, text

BUILTIN_PROFILES = ("h200", "mi300x", "a100", "h100", "v100", "a40", "l40", "mi100", "mi210", "rx6900xt")
SCOPES = ("per_cu", "per_xcd", "device")
FACT_KEYS = {"name", "vendor", "arch", "compute_units", "xcds", "l2_bytes_reported", "llc_bytes_reported",
             "sm_clock_max_mhz", "mem_clock_max_mhz", "memory_bus_width_bits", "total_memory_bytes",
             "memory_kind", "threads_per_cu", "registers_per_cu", "shared_bytes_per_cu", "warp_size",
             "driver", "uuid", "environment"}
FAULT_KEYS = ("fail_after_calls", "interrupt_after_calls", "other_processes", "launch_sleep_ms")
# optional per-level fields: (lowest, highest, lowest excluded, integer)
LEVEL_RANGES = {"width": (0, 2, True, False), "tail_hit": (0, 1, False, False),
                "tail_power": (0, 20, True, False), "decline_power": (0, 5, True, False),
                "collapse_ratio": (1, 20, True, False), "far_bandwidth_gbs": (0, 1e7, True, False),
                "alias_depth": (0, 0.9, False, False), "latency_ns": (0, 1e6, True, False),
                "far_latency_ns": (0, 1e6, True, False), "line_bytes": (16, 4096, False, True),
                "sector_bytes": (8, 4096, False, True), "miss_bytes": (8, 4096, False, True),
                "partitions": (1, 2, False, True), "unified_bytes": (1024, 1 << 30, False, True),
                "reserve_bytes": (0, 1 << 30, False, True)}
INTEGER_FIELDS = ("partitions", "line_bytes", "sector_bytes", "miss_bytes", "unified_bytes", "reserve_bytes")
MAX_TABLE_PAIRS = 4096


def _hit_table(raw, where: str) -> tuple[tuple[float, float], ...]:
    """A level's hit table: [ratio, hit rate] pairs, ratios > 0 and increasing, hit rates in [0, 1]."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_TABLE_PAIRS:
        raise InputError(f"{where}: hit_table must be a list of 1 to {MAX_TABLE_PAIRS} [ratio, hit rate] pairs")
    pairs = []
    for i, pair in enumerate(raw):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise InputError(f"{where}: hit_table[{i}] must be a pair [ratio, hit rate]")
        ratio = number(pair[0], f"{where}: hit_table[{i}] ratio", lo=0, hi=1e6, lo_open=True)
        hit = number(pair[1], f"{where}: hit_table[{i}] hit rate", lo=0, hi=1)
        if pairs and ratio <= pairs[-1][0]:
            raise InputError(f"{where}: hit_table ratios must increase, got {pair[0]!r} after {raw[i - 1][0]!r}")
        pairs.append((float(ratio), float(hit)))
    return tuple(pairs)


@dataclass
class SimProfile:
    facts: DeviceFacts
    levels: list[SimLevel]
    noise: float = 0.02
    outlier_rate: float = 0.0
    seed: int = 1
    noise_keyed: bool = False   # each launch's noise from its configuration, size and repeat, not one stream
    noise_bursts: list[dict] = field(default_factory=list)
    faults: dict = field(default_factory=dict)   # fail_after_calls, interrupt_after_calls, other_processes
    default_carveout_kib: int | None = None   # the carveout a launch gets when it asks for none
    least_carveout_kib: int = 0               # the driver never carves less for the tool's launches

    def levels_under(self, carveout_kib: int | None) -> list[SimLevel]:
        """The levels a launch sees when it asks for ``carveout_kib`` (None: the default): a
        level on the unified array holds what the carveout the driver grants leaves of it."""
        if carveout_kib is None or self.default_carveout_kib is None:
            return self.levels
        granted = max(carveout_kib, self.least_carveout_kib)
        return [dataclasses.replace(lv, capacity_bytes=lv.unified_bytes - granted * 1024 - lv.reserve_bytes)
                if lv.unified_bytes else lv for lv in self.levels]

    def true_capacity(self, name: str) -> int | None:
        for lv in self.levels:
            if lv.name == name:
                return lv.capacity_bytes
        return None


def _level(raw, i: int, last: bool, source: str) -> SimLevel:
    where = f"profile {source}: level {i + 1}"
    if not isinstance(raw, dict):
        raise InputError(f"{where} must be an object")
    name = text(raw.get("name", f"level{i + 1}"), f"{where}: name", max_len=40)
    bw = number(raw.get("bandwidth_gbs"), f"{where}: bandwidth_gbs", lo=0, hi=1e7, lo_open=True)
    cap = raw.get("capacity_bytes")
    if last:
        if cap is not None:
            raise InputError(f"{where}: the last level is main memory and has no capacity_bytes")
    else:
        number(cap, f"{where}: capacity_bytes", lo=1024, hi=1 << 50, integer=True)
    scope = raw.get("scope", "device")
    if scope not in SCOPES:
        raise InputError(f"{where}: scope must be one of {', '.join(SCOPES)}")
    transition = raw.get("transition", "hashed")
    if transition not in TRANSITIONS:
        raise InputError(f"{where}: transition must be one of {', '.join(TRANSITIONS)}")
    extra = {}
    if transition == "table":
        extra["hit_table"] = _hit_table(raw.get("hit_table"), where)
    elif raw.get("hit_table") is not None:
        raise InputError(f"{where}: hit_table is read only with transition table")
    for key, (lo, hi, lo_open, integer) in LEVEL_RANGES.items():
        if raw.get(key) is not None:
            extra[key] = number(raw[key], f"{where}: {key}", lo=lo, hi=hi, lo_open=lo_open, integer=integer)
    for key in ("line_bytes", "sector_bytes", "miss_bytes"):
        if key in extra and extra[key] & (extra[key] - 1):
            raise InputError(f"{where}: {key} must be a power of two")
    return SimLevel(name=name, bandwidth_gbs=float(bw), capacity_bytes=cap, scope=scope,
                    transition=transition, **{k: (v if k in INTEGER_FIELDS + ("hit_table",) else float(v))
                                              for k, v in extra.items()})


def _bursts(raw, source: str) -> list[dict]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > 1000:
        raise InputError(f"profile {source}: noise_bursts must be a list of at most 1000 objects")
    out = []
    for i, b in enumerate(raw):
        where = f"profile {source}: noise_bursts[{i}]"
        if not isinstance(b, dict):
            raise InputError(f"{where} must be an object")
        out.append({"after_calls": number(b.get("after_calls", 0), f"{where}.after_calls", lo=0, integer=True),
                    "calls": number(b.get("calls", 0), f"{where}.calls", lo=0, integer=True),
                    "noise": float(number(b.get("noise", 0.2), f"{where}.noise", lo=0, hi=1))})
    return out


def parse_profile(data: dict, source: str = "profile") -> SimProfile:
    """Validate a profile (schema in the interface document) and build it."""
    if not isinstance(data, dict):
        raise InputError(f"profile {source} must be a JSON object")
    vendor = data.get("vendor", "nvidia")
    if vendor not in ("nvidia", "amd"):
        raise InputError(f"profile {source}: vendor must be nvidia or amd, got {vendor!r}")
    number(data.get("compute_units"), f"profile {source}: compute_units", lo=1, hi=100000, integer=True)
    raw_levels = data.get("levels")
    if not isinstance(raw_levels, list) or not 2 <= len(raw_levels) <= 16:
        raise InputError(f"profile {source}: levels must list at least one cache and main memory (at most 16)")
    levels = [_level(lv, i, i == len(raw_levels) - 1, source) for i, lv in enumerate(raw_levels)]
    bws = [lv.bandwidth_gbs for lv in levels]
    if not all(a > b for a, b in zip(bws, bws[1:])):
        raise InputError(f"profile {source}: bandwidths must fall from level to level")
    noise = float(number(data.get("noise", 0.02), f"profile {source}: noise", lo=0, hi=0.5))
    outliers = float(number(data.get("outlier_rate", 0.0), f"profile {source}: outlier_rate", lo=0, hi=1))
    seed = number(data.get("seed", 1), f"profile {source}: seed", lo=0, hi=2**63 - 1, integer=True)
    keyed = data.get("noise_keyed", False)
    if not isinstance(keyed, bool):
        raise InputError(f"profile {source}: noise_keyed must be true or false")
    faults = {k: number(data[k], f"profile {source}: {k}", lo=0, hi=10_000 if k == "launch_sleep_ms" else 2**62,
                        integer=True)
              for k in FAULT_KEYS if data.get(k) is not None}
    facts = DeviceFacts.from_dict({k: v for k, v in data.items() if k in FACT_KEYS}, source=f"profile {source}")
    facts.name = f"simulated {text(data.get('name', 'gpu'), f'profile {source}: name', max_len=100)}"
    facts.host = socket.gethostname()
    facts.simulated = True
    facts.torch = facts.triton = ""
    facts.environment = {"simulated": True, **facts.environment}
    if facts.driver:
        facts.environment.setdefault("driver", facts.driver)
    if facts.total_memory_bytes is None:
        facts.total_memory_bytes = 16 * 2**30
    profile = SimProfile(facts=facts, levels=levels, noise=noise, outlier_rate=outliers, seed=seed, noise_keyed=keyed,
                         noise_bursts=_bursts(data.get("noise_bursts"), source), faults=faults)
    _unified_array(profile, data, source)
    return profile


def load_profile(name_or_path: str) -> SimProfile:
    """A built-in profile by name (see BUILTIN_PROFILES) or a profile JSON file."""
    if name_or_path in BUILTIN_PROFILES:
        raw = resources.files(__package__).joinpath(f"profiles/{name_or_path}.json").read_text()
        return parse_profile(json.loads(raw), source=name_or_path)
    path = Path(name_or_path)
    if not path.exists():
        raise InputError(f"no built-in profile {name_or_path!r} and no such file; built-in "
                         f"profiles: {', '.join(BUILTIN_PROFILES)}")
    data = read_json_bounded(path, what="profile", label="profile")
    return parse_profile(data, source=str(path))


def _unified_array(profile: SimProfile, data: dict, source: str) -> None:
    """The L1 carved from a unified array (NVIDIA sm_70 on): ``unified_bytes`` and
    ``reserve_bytes`` on the per_cu level, ``default_carveout_kib`` (and ``least_carveout_kib``,
    what the driver always keeps for the tool's launches) on the profile; the level's
    capacity_bytes must be what the default carveout leaves."""
    from detect_caches.carveout import supported_carveouts
    where = f"profile {source}"
    unified = [lv for lv in profile.levels if lv.unified_bytes]
    default, least = data.get("default_carveout_kib"), data.get("least_carveout_kib")
    if not unified:
        if default is not None or least is not None or any(lv.reserve_bytes for lv in profile.levels):
            raise InputError(f"{where}: default_carveout_kib, least_carveout_kib and reserve_bytes need a "
                             f"level with unified_bytes")
        return
    steps = supported_carveouts(profile.facts)
    if not steps:
        raise InputError(f"{where}: unified_bytes needs an NVIDIA arch of sm_70 or later (AMD's LDS is separate)")
    if len(unified) > 1 or unified[0].scope != "per_cu":
        raise InputError(f"{where}: unified_bytes belongs on the one per_cu level carved from the array")
    for key, value in (("default_carveout_kib", default), ("least_carveout_kib", least)):
        if value is not None and value not in steps:
            raise InputError(f"{where}: {key} must be one of {', '.join(map(str, steps))}, got {value!r}")
    if default is None:
        raise InputError(f"{where}: a level with unified_bytes needs default_carveout_kib")
    least = least or 0
    if least > default:
        raise InputError(f"{where}: least_carveout_kib ({least}) exceeds default_carveout_kib ({default})")
    lv = unified[0]
    want = lv.unified_bytes - default * 1024 - lv.reserve_bytes
    if lv.capacity_bytes != want:
        raise InputError(f"{where}: {lv.name} capacity_bytes must be unified_bytes - default_carveout_kib x 1024 "
                         f"- reserve_bytes = {want}, got {lv.capacity_bytes}")
    if lv.unified_bytes - max(steps) * 1024 - lv.reserve_bytes < 1024:
        raise InputError(f"{where}: unified_bytes leaves less than 1 KiB of {lv.name} at the {max(steps)} KiB carveout")
    profile.default_carveout_kib, profile.least_carveout_kib = int(default), int(least)
