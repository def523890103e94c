"""Attach the peak probes (measure.peak: other launch configurations measured inside a level's
plateau) to the levels: the best bandwidth a tuned launch reached there, and with what."""
from __future__ import annotations

from detect_caches.records import REJECTED_FLAGS, Measurement

from detect_caches.detector.levels import Level


def describe_launch(r: Measurement) -> str:
    """A short, human description of one measurement's launch configuration."""
    share = r.programs // r.rows if r.rows and r.programs > r.rows and r.sweep == "shared" else 1
    text = f"{r.programs} programs, block {r.block_size}, {r.num_warps} warps"
    if share > 1:
        text += f", {share} programs per row"
    return text


def attach_peaks(levels: list[Level], records: list[Measurement]) -> None:
    """For each level, the fastest accepted peak probe of its sweep inside its plateau."""
    unusable = REJECTED_FLAGS | {"poor_r2", "noisy"}
    probes = [r for r in records if r.phase == "peak" and not r.flag_set & unusable and r.bandwidth_gbs > 0]
    for lv in levels:
        if lv.plateau_lo_bytes is None or lv.plateau_hi_bytes is None:
            continue
        inside = [r for r in probes if r.sweep == lv.sweep
                  and lv.plateau_lo_bytes <= r.working_set_bytes <= lv.plateau_hi_bytes]
        if not inside:
            continue
        by_launch: dict[tuple, list[Measurement]] = {}
        for r in inside:
            key = (r.programs, r.rows, r.block_size, r.num_warps, r.load_flavour, r.stream_bytes)
            by_launch.setdefault(key, []).append(r)
        # the launch measured again is the one the probes chose: its later reading is independent
        # of that choice (the first was the largest of several noisy ones, biased upwards; the
        # smaller of the two, used before, is biased downwards)
        confirmed = [rs[-1] for rs in by_launch.values() if len(rs) > 1]
        inside = [rs[-1] for rs in by_launch.values()]
        best = confirmed[-1] if confirmed else max(inside, key=lambda r: r.bandwidth_gbs)
        if best.bandwidth_gbs <= lv.bandwidth_gbs:
            # no candidate beat the sweep's own launch: its plateau is the peak
            lv.peak_bandwidth_gbs = lv.bandwidth_gbs
            lv.peak_launch = f"the sweep's own launch (best of {len(inside)} candidates: {best.bandwidth_gbs:,.0f} GB/s)"
            continue
        lv.peak_bandwidth_gbs = round(best.bandwidth_gbs, 1)
        lv.peak_launch = describe_launch(best) + f" (best of {len(inside)} candidates)"
