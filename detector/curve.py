"""A sweep's bandwidth curve in the form the analysis works on: log size, log bandwidth."""
from __future__ import annotations

from dataclasses import dataclass, field

import math

import numpy as np

from detect_caches.noise import robust_sigma as _robust_sigma
from detect_caches.records import REJECTED_FLAGS, Measurement

BINS_PER_OCTAVE = 8


@dataclass
class Curve:
    """Unique working sets (bytes), one bandwidth at each (GB/s: _center of its repeats), and repeat counts."""

    sweep: str
    size_bytes: np.ndarray
    bandwidth_gbs: np.ndarray
    repeats: np.ndarray
    footprint_bytes: np.ndarray   # device-wide distinct bytes at each size
    noisy: np.ndarray             # bool: a point at this size was flagged poor_r2 or noisy
    flagged_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))   # sizes of every flagged point

    @property
    def x(self) -> np.ndarray:
        """log2 of the working set (octaves)."""
        return np.log2(self.size_bytes)

    @property
    def y(self) -> np.ndarray:
        """log10 of the bandwidth."""
        return np.log10(self.bandwidth_gbs)

    def __len__(self) -> int:
        return int(self.size_bytes.size)


NOISY_FLAGS = frozenset({"poor_r2", "noisy"})
PROBE_PHASES = ("peak", "sector", "line")   # probes of other launches: not points of a curve


def build_curve(records: list[Measurement], sweep: str) -> Curve:
    """One bandwidth per size from its repeats (_center), sorted by size; rejected points and the peak probes
    and the stride probes (other launch configurations: measure.peak, measure.transfer) left out, and points that stayed noisy after a
    re-measure too, while six clean sizes remain (a busy GPU's bursts must not draw levels: they
    lower the confidence of what they touch instead)."""
    rows = [r for r in records if r.sweep == sweep and r.phase not in PROBE_PHASES and not (r.flag_set & REJECTED_FLAGS)
            and r.bandwidth_gbs > 0 and np.isfinite(r.bandwidth_gbs)]
    clean = [r for r in rows if not r.flag_set & NOISY_FLAGS]
    flagged = np.array(sorted(float(r.working_set_bytes) for r in rows if r.flag_set & NOISY_FLAGS))
    if len({r.working_set_bytes for r in clean}) >= 6:
        rows = clean
    by_size: dict[int, list[Measurement]] = {}
    for r in rows:
        by_size.setdefault(int(r.working_set_bytes), []).append(r)
    sizes = np.array(sorted(by_size), dtype=float)
    bw = np.array([_center([r.bandwidth_gbs for r in by_size[int(s)]]) for s in sizes])
    reps = np.array([len(by_size[int(s)]) for s in sizes])
    noisy = np.array([any(r.flag_set & {"poor_r2", "noisy"} for r in by_size[int(s)]) for s in sizes],
                     dtype=bool)
    foot = []
    for s in sizes:
        r = by_size[int(s)][0]
        if sweep == "private" and (r.rows or r.programs) and r.stream_bytes:
            foot.append(float(min(r.rows or r.programs, r.programs) * r.stream_bytes))  # distinct rows
        else:
            foot.append(float(s))                              # shared buffer or aggregate size
    return Curve(sweep, sizes, bw, reps, np.array(foot), noisy, flagged)


def _center(values: list[float]) -> float:
    """One size's bandwidth from its repeats: the median of three, the mean of four or more less
    the fastest and the slowest (a fall measured again for precision has four to six: a median
    keeps two thirds of what their mean would of the noise's reduction, the trimmed mean most of
    it, while an outlier still goes)."""
    v = sorted(values)
    if len(v) == 3:
        return v[1]
    if len(v) >= 4:
        v = v[1:-1]
    return sum(v) / len(v)


def binned(curve: Curve, bins_per_octave: int = BINS_PER_OCTAVE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Collapse the curve onto a uniform log grid: one median per non-empty bin.

    Refinement puts many points near knees; without this they would dominate the
    segmentation cost (methods.md). Returns bin x (octaves), bin y (log10 GB/s) and, for each
    raw point, the index of its bin.
    """
    x, y = curve.x, curve.y
    edges = np.floor((x - x.min()) * bins_per_octave + 1e-9).astype(int)
    uniq = np.unique(edges)
    bx = np.array(bin_medians(edges, x))
    by = np.array(bin_medians(edges, y))
    point_bin = np.searchsorted(uniq, edges)
    return bx, by, point_bin


def robust_sigma(y: np.ndarray) -> float:
    """Noise of a binned log-bandwidth curve (0.005 when it is too short to tell)."""
    return _robust_sigma(y, default=0.005)


NEIGHBOUR_GAP = 0.03   # sizes this close (relative) measure nearly the same speed


def point_sigma(size_bytes: np.ndarray, y: np.ndarray, fallback: float) -> float:
    """Noise of one raw point (log10 GB/s): the robust spread of the differences between points
    measured at nearly the same size (the refinement puts many such pairs around each fall), over
    sqrt 2. The binned curve's noise (robust_sigma) also counts the slope of declines and falls
    between bins; for resampling one point's noise that overstated it two- to threefold on the
    simulator. ``fallback`` below 8 such pairs."""
    order = np.argsort(size_bytes, kind="stable")
    s, v = np.asarray(size_bytes, dtype=float)[order], np.asarray(y, dtype=float)[order]
    close = s[1:] / s[:-1] - 1 < NEIGHBOUR_GAP
    d = np.diff(v)[close]
    if d.size < 8:
        return fallback
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def local_level(y: np.ndarray, point_bin: np.ndarray, first: int, last: int, default: float) -> float:
    """Median over bins ``first..last`` of each bin's median log bandwidth (the plateau's default
    when fewer than three points). Bins, not points: the refinement crowds points at the end of
    the fall above, and counted one by one they pulled the level up into the fall (a simulated
    210 MiB cache read 3% small)."""
    sel = (point_bin >= first) & (point_bin <= last)
    if np.count_nonzero(sel) < 3:
        return default
    return median(bin_medians(point_bin[sel], y[sel]))


def median(values: list[float]) -> float:
    """np.median's figure for a short list of finite values (build_curve keeps only those),
    without its overhead (a pass reads thousands)."""
    s = sorted(values)
    m = len(s) // 2
    return float(s[m]) if len(s) % 2 else (float(s[m - 1]) + float(s[m])) / 2


def bin_medians(keys: np.ndarray, values: np.ndarray) -> list[float]:
    """The median of ``values`` in each distinct key, keys in increasing order."""
    groups: dict[int, list[float]] = {}
    for k, v in zip(keys.tolist(), values.tolist()):
        groups.setdefault(k, []).append(v)
    return [median(groups[k]) for k in sorted(groups)]
