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


def latency_figures(plateaus, owners: list[tuple[int | None, str]], levels) -> list[float | None]:
    """The figure a level reports (its hit latency, a far step) for the chase plateau it was read
    from, so the plot says what the report says; None for any other plateau. Each figure goes to
    the nearest plateau of its level and part within SAME_LATENCY, one figure per plateau."""
    pairs = []
    for k, (owner, part) in enumerate(owners):
        if owner is None:
            continue
        lv = levels[owner]
        targets = [s["latency_ns"] for s in (lv.latency_steps or [])[1:]] if part == "far" else [lv.latency_ns]
        ns = DENSE_SLOT_BYTES / plateaus[k].bandwidth_gbs
        pairs += [(abs(math.log(ns / t)), k, (owner, part == "far", j), t) for j, t in enumerate(targets) if t]
    out: list[float | None] = [None] * len(plateaus)
    taken: set = set()
    for dist, k, target, t in sorted(pairs):
        if dist <= SAME_LATENCY and out[k] is None and target not in taken:
            out[k] = t
            taken.add(target)
    return out


def step_levels(plateau_levels: list, n_steps: int) -> list:
    """A fall belongs to the level of the plateau above it."""
    return [plateau_levels[k] if k < len(plateau_levels) else None for k in range(n_steps)]
