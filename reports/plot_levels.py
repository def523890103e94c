"""Which level each plateau and fall of a plot belongs to, and its colour: one colour per level
in every panel (bandwidth.png's sweeps and latency chase, history.png, fleet.png)."""
from __future__ import annotations

import math

from detect_caches.grid import DENSE_SLOT_BYTES

# Okabe-Ito: told apart with the common colour-vision deficiencies
COLORS = ["#0072B2", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#D55E00", "#000000"]
UNNAMED = "#888888"
SAME_SPEED = math.log(1.25)     # a plateau of another sweep this close in speed is that level
SAME_LATENCY = math.log(1.15)   # a chase plateau this close to a level's latency is that level


def level_color(index: int | None) -> str:
    return UNNAMED if index is None else COLORS[index % len(COLORS)]


def bandwidth_plateaus(detection, sweep: str) -> list[int | None]:
    """The index (in detection.levels) of the level each plateau of ``sweep`` shows: its own
    level where one was made from it, else the level of the nearest speed (a device level the
    private sweep passes again), else None."""
    an = detection.sweeps[sweep]
    levels = detection.levels
    out: list[int | None] = []
    for p in an.plateaus:
        own = next((i for i, lv in enumerate(levels) if lv.sweep == sweep
                    and lv.plateau_lo_bytes == float(p.size_lo_bytes)
                    and lv.plateau_hi_bytes == float(p.size_hi_bytes)), None)
        if own is None:
            others = [(abs(math.log(lv.bandwidth_gbs / p.bandwidth_gbs)), i) for i, lv in enumerate(levels)
                      if lv.sweep != sweep and lv.bandwidth_gbs > 0]
            best = min(others, default=None)
            own = best[1] if best is not None and best[0] <= SAME_SPEED else None
        out.append(own)
    return out


def latency_plateaus(detection) -> list[tuple[int | None, str]]:
    """(level index, part) for each plateau of the latency chase: the level whose latency (or one
    of whose latency steps) is nearest; part is "near" or "far" for a level seen in steps."""
    an = detection.sweeps["chase"]
    targets = []
    for i, lv in enumerate(detection.levels):
        steps = lv.latency_steps or []
        if len(steps) > 1:
            targets += [(s["latency_ns"], i, "near" if k == 0 else "far") for k, s in enumerate(steps)]
        elif lv.latency_ns:
            targets.append((lv.latency_ns, i, ""))
    out = []
    for p in an.plateaus:
        ns = DENSE_SLOT_BYTES / p.bandwidth_gbs
        best = min(((abs(math.log(ns / t)), i, part) for t, i, part in targets), default=None)
        out.append((best[1], best[2]) if best is not None and best[0] <= SAME_LATENCY else (None, ""))
    return out


def step_levels(plateau_levels: list, n_steps: int) -> list:
    """A fall belongs to the level of the plateau above it."""
    return [plateau_levels[k] if k < len(plateau_levels) else None for k in range(n_steps)]
