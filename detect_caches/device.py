"""Device facts and the physical bandwidth ceilings derived from them. Torch-free.

A live run fills `DeviceFacts` from torch and NVML (measure.gpu) or from a profile
(measure.simulated); `detect-caches analyze --device-json` reads the same fields from a file.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from detect_caches.errors import InputError
from detect_caches.safe_read import read_json_bounded

VENDORS = ("nvidia", "amd")
FASTER_THAN_MEMORY = 2.0   # a plateau this far above the memory's bus x clock ceiling is a cache (an
                           # H200's memory reads 0.97 of it; drivers report memory clocks under more
                           # than one data-rate convention, a factor of 2 either way)

# L1 load bytes per clock per SM/CU. NVIDIA: 128 B/clk (Volta and later; the brief's figure).
# AMD: 64 B/clk/CU (CDNA vL1D), a published per-CU rate, not a reading.
L1_BYTES_PER_CLOCK = {"nvidia": 128, "amd": 64}

# Chiplets (XCDs) for AMD parts whose torch properties do not say: gcnArchName prefix -> XCDs.
# MI300X: 8 XCDs x 38 CUs = 304; MI300A: 6 XCDs; MI325X shares gfx942 with 8 XCDs.
KNOWN_XCDS = {"gfx942": {304: 8, 228: 6, 80: 2, 38: 1}, "gfx950": {256: 8}}


@dataclass
class DeviceFacts:
    """What the tool knows about the device. Units in names; None where unknown."""

    name: str = "unknown"
    vendor: str = "nvidia"
    arch: str = ""                       # "sm_90", "gfx942", ...
    compute_units: int = 0               # SMs (NVIDIA) or CUs (AMD)
    xcds: int = 1                        # chiplets sharing nothing below the last-level cache
    l2_bytes_reported: int | None = None  # as the API reports it (per XCD on AMD CDNA3)
    llc_bytes_reported: int | None = None  # Infinity Cache / MALL, where known
    total_memory_bytes: int | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    memory_bus_width_bits: int | None = None
    memory_kind: str = "HBM"             # "HBM" or "DRAM" (GDDR parts)
    driver: str = ""
    torch: str = ""
    triton: str = ""
    uuid: str = ""
    index: int = 0
    host: str = ""
    simulated: bool = False
    # per SM/CU resources that bound how many programs run at once (single-wave check)
    threads_per_cu: int | None = None
    registers_per_cu: int | None = None
    shared_bytes_per_cu: int | None = None
    warp_size: int = 32
    # what a driver or firmware update changes under a user's feet (measure.clocks.read_environment)
    environment: dict = field(default_factory=dict)

    # -- physical ceilings -------------------------------------------------------------
    def l1_ceiling_gbs(self) -> float | None:
        """Sum over SMs/CUs of the L1 load rate at the maximum SM clock (GB/s)."""
        per_clock = L1_BYTES_PER_CLOCK.get(self.vendor)
        if not (per_clock and self.compute_units and self.sm_clock_max_mhz):
            return None
        return self.compute_units * per_clock * self.sm_clock_max_mhz * 1e6 / 1e9

    def memory_ceiling_gbs(self) -> float | None:
        """Bus width x memory clock x 2 (double data rate), in GB/s."""
        if not (self.memory_bus_width_bits and self.mem_clock_max_mhz):
            return None
        return self.memory_bus_width_bits / 8 * self.mem_clock_max_mhz * 1e6 * 2 / 1e9

    def faster_than_memory_gbs(self) -> float | None:
        """The speed past which a plateau is a cache, not memory: FASTER_THAN_MEMORY x the
        memory's ceiling (None where the facts lack its bus width or clock)."""
        ceiling = self.memory_ceiling_gbs()
        return FASTER_THAN_MEMORY * ceiling if ceiling else None

    def ceiling_for(self, level_name: str) -> float | None:
        if level_name in ("L1", "L0"):
            return self.l1_ceiling_gbs()
        if level_name in ("HBM", "DRAM"):
            return self.memory_ceiling_gbs()
        return None

    def max_plausible_gbs(self) -> float | None:
        """No load stream can beat the L1 ceiling; a figure above it is a broken measurement."""
        return self.l1_ceiling_gbs()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, *, source: str = "device facts") -> "DeviceFacts":
        if not isinstance(data, dict):
            raise InputError(f"{source} must be a JSON object")
        known = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in data.items():
            if key not in known or value is None:
                continue
            want = known[key].type
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number and not math.isfinite(value):
                raise InputError(f"{source}: field {key!r} must be a finite number, got {value!r}")
            if want == "dict":
                if not isinstance(value, dict) or len(value) > 100 or not all(
                        isinstance(k, str) and (isinstance(v, (str, int, float, bool)) or v is None)
                        for k, v in value.items()):
                    raise InputError(f"{source}: field {key!r} must be an object of plain values")
                kwargs[key] = dict(value)
            elif "int" in want and number:
                if "float" not in want and value != int(value):
                    raise InputError(f"{source}: field {key!r} must be a whole number, got {value!r}")
                kwargs[key] = int(value) if "float" not in want else float(value)
            elif "float" in want and number:
                kwargs[key] = float(value)
            elif want == "str" and isinstance(value, str) and len(value) <= 1000:
                kwargs[key] = value
            elif want == "bool" and isinstance(value, bool):
                kwargs[key] = value
            else:
                raise InputError(f"{source}: field {key!r} has the wrong type ({type(value).__name__})")
        for key in POSITIVE:
            if kwargs.get(key) is not None and not kwargs[key] > 0:
                raise InputError(f"{source}: field {key!r} must be > 0, got {kwargs[key]!r}")
        if kwargs.get("xcds") is not None and not 1 <= kwargs["xcds"] <= 64:
            raise InputError(f"{source}: field 'xcds' must be from 1 to 64, got {kwargs['xcds']!r}")
        if kwargs.get("compute_units") is not None and not 0 <= kwargs["compute_units"] <= 100000:
            raise InputError(f"{source}: field 'compute_units' is out of range")
        if kwargs.get("warp_size") is not None and kwargs["warp_size"] not in (16, 32, 64):
            raise InputError(f"{source}: field 'warp_size' must be 32 or 64, got {kwargs['warp_size']!r}")
        if kwargs.get("memory_kind", "HBM") not in ("HBM", "DRAM"):
            raise InputError(f"{source}: field 'memory_kind' must be HBM or DRAM")
        facts = cls(**kwargs)
        if facts.vendor not in VENDORS:
            raise InputError(f"{source}: vendor must be one of {', '.join(VENDORS)}, got {facts.vendor!r}")
        return facts


POSITIVE = ("l2_bytes_reported", "llc_bytes_reported", "total_memory_bytes", "sm_clock_max_mhz",
            "mem_clock_max_mhz", "memory_bus_width_bits", "threads_per_cu", "registers_per_cu")


def xcds_for(arch: str, compute_units: int) -> int:
    """XCD count for known AMD multi-chiplet parts; 1 elsewhere."""
    table = KNOWN_XCDS.get(arch.split(":")[0], {})
    return table.get(compute_units, 1)


def is_rdna(facts: DeviceFacts) -> bool:
    return facts.vendor == "amd" and facts.arch.startswith(("gfx10", "gfx11", "gfx12"))


def load_device_json(path: str | Path) -> DeviceFacts:
    path = Path(path)
    data = read_json_bounded(path, what="device JSON")
    if isinstance(data, dict) and isinstance(data.get("device"), dict):
        data = data["device"]  # a result.json works too
    return DeviceFacts.from_dict(data, source=str(path))
