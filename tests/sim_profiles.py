"""Simulated GPUs with known truths for the accuracy tests: every fall shape (sharp, cliff with a
tail of partial hits, hashed sets, random tail, pseudo-LRU decline then collapse, a split L2),
2 to 5 levels, NVIDIA and AMD, sizes that are not powers of two, 64 to 152 SMs/CUs, and a cache
level that no vendor names."""
KIB, MIB = 1024, 1024 * 1024

ACCURACY_PROFILES = {
    # H200-like: an L1 cliff followed by partial hits, a narrow hashed L2
    "nv_cliff_tail": {
        "name": "nv_cliff_tail", "vendor": "nvidia", "arch": "sm_90", "compute_units": 132,
        "l2_bytes_reported": 60 * MIB, "noise": 0.015,
        "levels": [{"name": "L1", "scope": "per_cu", "capacity_bytes": 221 * KIB, "bandwidth_gbs": 32000,
                    "transition": "cliff_tail", "tail_hit": 0.75, "tail_power": 2.0},
                   {"name": "L2", "scope": "device", "capacity_bytes": 57 * MIB + 300 * KIB, "bandwidth_gbs": 9000,
                    "transition": "hashed", "width": 0.03, "partitions": 2},
                   {"name": "HBM", "bandwidth_gbs": 4500}]},
    # A100-like: a pseudo-LRU L1 (sags, then collapses), a broad hashed L2 in two partitions
    "nv_plru_split": {
        "name": "nv_plru_split", "vendor": "nvidia", "arch": "sm_80", "compute_units": 108,
        "l2_bytes_reported": 40 * MIB, "noise": 0.01,
        "levels": [{"name": "L1", "scope": "per_cu", "capacity_bytes": 177 * KIB, "bandwidth_gbs": 19000,
                    "transition": "plru", "decline_power": 0.5, "collapse_ratio": 1.45},
                   {"name": "L2", "scope": "device", "capacity_bytes": 37 * MIB + 512 * KIB, "bandwidth_gbs": 5400,
                    "transition": "hashed", "width": 0.08, "partitions": 2},
                   {"name": "HBM", "bandwidth_gbs": 1800}]},
    # CDNA2-like: random replacement in L1, an LRU cliff in L2 (its share per CU, 12.6 MiB over
    # 64 CUs, well past the L1's tail: where a random tail runs into the L2's fill, see the README)
    "amd_random": {
        "name": "amd_random", "vendor": "amd", "arch": "gfx90a", "compute_units": 64, "noise": 0.01,
        "levels": [{"name": "L1", "scope": "per_cu", "capacity_bytes": 20 * KIB + 512, "bandwidth_gbs": 10500,
                    "transition": "random"},
                   {"name": "L2", "scope": "device", "capacity_bytes": 12 * MIB + 640 * KIB, "bandwidth_gbs": 4900,
                    "transition": "sharp"},
                   {"name": "HBM", "bandwidth_gbs": 1400}]},
    # CDNA3-like with 4 XCDs: a per-XCD L2 and an Infinity Cache
    "amd_xcd": {
        "name": "amd_xcd", "vendor": "amd", "arch": "gfx942", "compute_units": 152, "xcds": 4, "noise": 0.015,
        "l2_bytes_reported": 3 * MIB, "llc_bytes_reported": 96 * MIB,
        "levels": [{"name": "L1", "scope": "per_cu", "capacity_bytes": 40 * KIB, "bandwidth_gbs": 30000,
                    "transition": "sharp"},
                   {"name": "L2", "scope": "per_xcd", "capacity_bytes": 3 * MIB + 256 * KIB, "bandwidth_gbs": 14000,
                    "transition": "hashed", "width": 0.05},
                   {"name": "Infinity Cache", "scope": "device", "capacity_bytes": 90 * MIB, "bandwidth_gbs": 6000,
                    "transition": "hashed", "width": 0.05},
                   {"name": "HBM", "bandwidth_gbs": 2600}]},
    # RDNA2-like: five levels, two of them per CU
    "rdna_five": {
        "name": "rdna_five", "vendor": "amd", "arch": "gfx1030", "compute_units": 80, "memory_kind": "DRAM",
        "noise": 0.01,
        "levels": [{"name": "L0", "scope": "per_cu", "capacity_bytes": 24 * KIB, "bandwidth_gbs": 14000,
                    "transition": "sharp"},
                   {"name": "L1", "scope": "per_cu", "capacity_bytes": 112 * KIB, "bandwidth_gbs": 9000,
                    "transition": "plru", "decline_power": 0.8, "collapse_ratio": 1.5},
                   {"name": "L2", "scope": "device", "capacity_bytes": 3 * MIB + 512 * KIB, "bandwidth_gbs": 4500,
                    "transition": "random"},
                   {"name": "Infinity Cache", "scope": "device", "capacity_bytes": 100 * MIB, "bandwidth_gbs": 1900,
                    "transition": "hashed", "width": 0.04},
                   {"name": "DRAM", "bandwidth_gbs": 480}]},
    # a third device cache on NVIDIA: no convention names it; it must be found whole
    "nv_unnamed_l3": {
        "name": "nv_unnamed_l3", "vendor": "nvidia", "arch": "sm_100", "compute_units": 96, "noise": 0.01,
        "l2_bytes_reported": 24 * MIB,
        "levels": [{"name": "L1", "scope": "per_cu", "capacity_bytes": 160 * KIB, "bandwidth_gbs": 24000,
                    "transition": "sharp"},
                   {"name": "L2", "scope": "device", "capacity_bytes": 23 * MIB, "bandwidth_gbs": 9000,
                    "transition": "hashed", "width": 0.05},
                   {"name": "L3", "scope": "device", "capacity_bytes": 200 * MIB, "bandwidth_gbs": 4000,
                    "transition": "hashed", "width": 0.05},
                   {"name": "HBM", "bandwidth_gbs": 1500}]},
    # two levels: one cache and memory
    "nv_two": {
        "name": "nv_two", "vendor": "nvidia", "arch": "sm_75", "compute_units": 64, "noise": 0.01,
        "levels": [{"name": "L1", "scope": "per_cu", "capacity_bytes": 96 * KIB + 512, "bandwidth_gbs": 12000,
                    "transition": "sharp"},
                   {"name": "HBM", "bandwidth_gbs": 800}]},
}
