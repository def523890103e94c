"""One capacity from two curves: where the one-SM pointer chase measured a per-SM/CU level, its
knee and the bandwidth fall share the level's capacity.

Each curve keeps its own plateau speeds and fall shape; only C is shared. The two readings of C
are combined as two Gaussians would be: the estimate moves from the bandwidth fit's C toward the
knee's by their precisions (each from how far a rerun moves that reading), and stays the
bandwidth fit's where the chase adds nothing; the interval is the two intervals mixed by the
same weights. Whether the two are one size is judged from their fits' posteriors in ln C
(detector.fallfit) and their repeatabilities, whichever doubt is more. The knee's doubt counts
CHASE_FLOOR more: the two curves are not the same access (one SM's dependent chain, every SM's
stream). The latency contrast between an L1 and the next level (several times) is far larger
than the bandwidth one (1.2x on some parts), so a fall that bandwidth barely shows is plain in
latency. Readings further apart than their doubts allow are not one size: both stay reported,
neither averaged (detector.latency). Device levels are left apart: one SM sees a split L2 as its
near half (an H200's chase knee at 27 MiB of its 59).
"""
from __future__ import annotations

import dataclasses
import math

from detect_caches.detector.capacity import CapacityEstimate
from detect_caches.detector.latency import UNKNOWN_KNEE, knee_groups
from detect_caches.detector.level_figures import plateau_level, with_capacity
from detect_caches.detector.levels import Level, SweepAnalysis
from detect_caches.detector.units import fmt_bytes

CHASE_FLOOR = 0.02     # ln C: how far a knee may lie from the bandwidth capacity beyond its own fit's doubt
                       # (one SM's chain against every SM's stream: on nine H100s and an H200 the L1's
                       # knee sat 1.8% sd from the bandwidth capacity over 37 runs, mean -0.6%)
AGREE_SIGMAS = 3.0     # two readings further apart than this many sigmas of their difference are not one size
MIN_SHARE = 0.01       # a knee with less of the say moves C under a hundredth of the gap: not called joined
Z98 = 2.326            # the intervals' 98% (detector.fallfit.LEVEL)
MIN_SIGMA = 1e-4       # ln C: a posterior narrower than its grid is taken this wide


def _moments(post: tuple) -> tuple[float, float]:
    grid, w = post
    mean = float(w @ grid)
    return mean, max(float(w @ (grid - mean) ** 2), MIN_SIGMA ** 2)


def joint_estimate(bandwidth: CapacityEstimate, latency: CapacityEstimate) -> tuple[CapacityEstimate, float] | None:
    """(the estimate both curves give, the chase's share of it), or None where either fit has no
    posterior or the two readings disagree."""
    pb = bandwidth.fit.posterior if bandwidth.fit is not None else None
    pl = latency.fit.posterior if latency.fit is not None else None
    if pb is None or pl is None:
        return None
    (_, vb), (_, vl) = _moments(pb), _moments(pl)
    # each reading's doubt: where its fit puts C, or how far a rerun moves it where that is more
    # (a fall read as the wrong shape can have a narrow posterior and a wide repeatability); the
    # knee's with the floor
    rb2, rl2 = bandwidth.repeatability ** 2, latency.repeatability ** 2 + CHASE_FLOOR ** 2
    db2, dl2 = max(vb, rb2), max(vl + CHASE_FLOOR ** 2, rl2)
    lb, ll = math.log(bandwidth.capacity_bytes), math.log(latency.capacity_bytes)
    if abs(lb - ll) > AGREE_SIGMAS * math.sqrt(db2 + dl2):
        return None
    # the readings weighed by how far a rerun moves each, and their intervals by the same weights
    # (the bandwidth fit's as it gave it: an onset's gap to the next size and its floor kept; the
    # knee's widened by the floor), so the interval holds the estimate and moves with it
    share = rb2 / (rb2 + rl2)
    lnc = lb + share * (ll - lb)
    reach = Z98 * CHASE_FLOOR
    low = (1 - share) * math.log(bandwidth.low_bytes) + share * (math.log(latency.low_bytes) - reach)
    high = (1 - share) * math.log(bandwidth.high_bytes) + share * (math.log(latency.high_bytes) + reach)
    scale = math.exp(lnc - lb)
    est = dataclasses.replace(bandwidth, capacity_bytes=math.exp(lnc), low_bytes=math.exp(low),
                              high_bytes=math.exp(high), repeatability=math.hypot((1 - share) * bandwidth.repeatability,
                                                                                 share * math.sqrt(rl2)),
                              half_hit_bytes=bandwidth.half_hit_bytes * scale if bandwidth.half_hit_bytes else None,
                              flip_spread=(1 - share) * bandwidth.flip_spread, alone=bandwidth)
    return est, share


def share_capacities(levels: list[Level], per_cu: int, priv: SweepAnalysis | None, chase: SweepAnalysis,
                     simulated: bool) -> None:
    """The first ``per_cu`` levels (from ``priv``'s steps, in order) take the capacity both curves
    give where the chase's own knee of the level is known and agrees (detector.latency.attach_latency
    ran first)."""
    if priv is None or per_cu <= 0:
        return
    index = {id(lv): k for k, lv in enumerate(levels[:per_cu])}
    for lv, knees, own in knee_groups(levels, chase):
        k = index.get(id(lv))
        if k is None or own is None or k >= len(priv.steps) or lv.latency_fall_shape == UNKNOWN_KNEE \
                or not lv.latency_capacity_bytes:
            continue
        bw, knee = priv.steps[k].estimate, chase.steps[own].estimate
        joined = joint_estimate(bw, knee)
        if joined is None:
            continue
        est, share = joined
        if share < MIN_SHARE:
            continue
        # the sweep's step holds the joint estimate (the plot and the report read it); the
        # refining rounds read the bandwidth fall's own (``alone``): where the fall alone is wide
        # its sizes are still measured (a knee's doubt can be more than it says: mi300x's L1)
        priv.steps[k] = dataclasses.replace(priv.steps[k], estimate=est)
        fresh = with_capacity(plateau_level(lv.name, "per_cu", priv, k, simulated), priv, k, 1.0, simulated)
        for key in ("capacity_bytes", "capacity_low_bytes", "capacity_high_bytes", "capacity_repeatability",
                    "half_hit_bytes"):
            setattr(lv, key, getattr(fresh, key))
        lv.confidence = max(lv.confidence, fresh.confidence)
        # the readings agree within their doubts: not two sizes reported apart (detector.latency's
        # note on this knee; one on a shelf past it stays)
        lv.notes = [n for n in lv.notes if not (n.startswith(f"the latency knee ({fmt_bytes(knee.capacity_bytes)})")
                                                and "neither is averaged" in n)]
        lv.notes.append(f"the capacity is read from both curves: the bandwidth fall's {fmt_bytes(bw.capacity_bytes)} "
                        f"and the latency knee's {fmt_bytes(knee.capacity_bytes)}, weighed by how far a rerun "
                        f"moves each ({share:.0%} the knee's)")
