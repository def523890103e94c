"""Facts about the measurement kernel that need neither triton nor torch."""
from __future__ import annotations

from detect_caches.grid import COARSE_BYTES, GRANULE_BYTES  # noqa: F401  (the sweeps' grid)

ELEM_BYTES = 4                 # float32
GRANULE_ELEMS = GRANULE_BYTES // ELEM_BYTES
BLOCK_SIZES = (64, 128, 256, 512, 1024, 2048)   # what users may choose (the seed's range)
# The peak probes also use 4096 and 8192: every thread then issues 2-4 16-byte loads per chunk,
# the bytes in flight that HBM needs (Little's law) at full occupancy.
LAUNCH_BLOCK_SIZES = BLOCK_SIZES + (4096, 8192)
FLAVOURS = ("volatile", "cached", "l2only")

# Kernel constexpr codes: which tl.load variant each flavour compiles to, per vendor.
# l2only is `.cg` on NVIDIA (ld.global.cg: L2 only). On AMD CDNA3 Triton's `.cg` gives
# `sc0 nt` (work-group scope, which the vL1D still serves), so the nearest L1-bypassing load
# is `.cv`, which gives `sc0 sc1` (system scope: misses the vL1D, served by L2). See README.
LOAD_CODE = {"volatile": 0, "cached": 1, "cg": 2, "cv": 3}
FLAVOUR_CODES = {
    "nvidia": {"volatile": 0, "cached": 1, "l2only": 2},
    "amd": {"volatile": 0, "cached": 1, "l2only": 3},
}


def flavour_code(flavour: str, vendor: str) -> int:
    return FLAVOUR_CODES[vendor][flavour]


def check_block_size(block_size: int, *, internal: bool = False) -> None:
    """Raise ValueError unless ``block_size`` is a power of two in 64..2048 (..8192 internally)."""
    allowed = LAUNCH_BLOCK_SIZES if internal else BLOCK_SIZES
    if block_size not in allowed:
        raise ValueError(f"block size must be a power of two from 64 to {allowed[-1]}, got {block_size}")


def stream_elems_for(stream_bytes: int) -> int:
    """float32 elements per program for ``stream_bytes``, a positive multiple of GRANULE_BYTES."""
    if stream_bytes <= 0 or stream_bytes % GRANULE_BYTES:
        raise ValueError(f"stream bytes per program must be a positive multiple of {GRANULE_BYTES}, "
                         f"got {stream_bytes}")
    return stream_bytes // ELEM_BYTES


def round_to_granule(nbytes: float, granule: int = GRANULE_BYTES) -> int:
    """Nearest multiple of ``granule`` bytes, at least one granule."""
    return max(granule, int(round(nbytes / granule)) * granule)


# In-kernel clocks (kernel constexpr CLOCK): per vendor, what is read and its tick in ns.
DEVICE_CLOCKS = {
    "nvidia": {"code": 0, "name": "%globaltimer (PTX global nanosecond timer)", "ns_per_tick": 1.0},
    "amd": {"code": 1, "name": "s_memrealtime (100 MHz real-time counter)", "ns_per_tick": 10.0},
}
