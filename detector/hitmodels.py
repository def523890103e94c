"""Hit-rate models of a cache level's fall under a cyclic sweep.

Each model gives the hit rate h in the level as a function of r = W / C, where W is the working
set and C the bytes the level holds: C has the same meaning in every model. Bandwidths mix
harmonically with h (1/BW = h/B_hi + (1 - h)/B_lo), so a model and the two plateau speeds give
the whole fall.

- ``lru``: LRU, no conflicts: every line hits up to C, none past it (a cliff at C).
- ``modulo``: LRU with sets picked by address bits (modulo): past C the sweep overflows the sets
  one by one, each set then missing on all its lines, so h = (1 - A (r - 1)) / r until every set
  has overflowed at C (1 + 1/A).
- ``cliff_tail``: a cliff at C onto partial hits that fade as a r^-p (an H200's L1).
- ``cliff_shelf``: a cliff at C onto a shelf of partial hits at a, which ends near k C (partial
  hits that another effect ends: an H200's L1 seen without the L2's own curve).
- ``random``: random replacement: h = 1 up to C, then the fixed point h = exp(-r (1 - h)).
- ``plru``: pseudo-LRU: h leaves 100% at 0.9 C, is 95% at C, sags as 0.95 r^-d and collapses
  near k C (the NVIDIA L1 tables). The sag is what places C: d from 0.15 and k from 1.25 keep
  it visible (with no sag, C would slide freely below a collapse that a hashed fall describes).
- ``hashed``: LRU with hashed sets, as a logistic in ln r of scale s (half the data hits at C).
- ``ways``: LRU with randomly hashed sets of A ways: a set holding n lines serves all of them
  when n <= A, so h = P[Poisson(A r) <= A - 1] (0.47 at C for 16 ways, 0.97 near 0.55 C).
- ``random_ways``: random replacement in hashed sets of A ways: the random fixed point of each
  set's load n / A, averaged over the loads (a line's set holds 1 + Poisson(A r) lines).

``onset`` models serve everything up to C: their C is the last size served whole, a measured
size (random replacement's and modulo's, whose hit rates leave 100% continuously, are placed
between measured sizes by the points past it); the others have C inside the fall.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincc, gammaln, lambertw


@dataclass(frozen=True)
class HitModel:
    name: str
    shape: str                                  # how the report describes a fall of this kind
    onset: bool                                 # h = 1 up to C
    grids: tuple[tuple[float, ...], ...] = ()   # shape parameters, each on a grid
    speeds: int = 2                             # plateau speeds it solves (a split level: 3)
    prior_score: float = 0.0                    # evidence it must win by, beside its parameters' (a
                                                # split level's broad halves: detector.splitfit)
    between_sizes: bool = False                 # an onset model whose C the points past it place
                                                # between measured sizes (its hits leave 100% continuously)

    @property
    def n_params(self) -> int:
        """Free parameters: C, the speeds and the shape parameters."""
        return 1 + self.speeds + len(self.grids)

    @property
    def penalty(self) -> float:
        """What the model's score adds to its misfit (rss / sigma^2): Akaike's two a parameter,
        and its prior score."""
        return 2.0 * self.n_params + self.prior_score

    def thetas(self) -> list[tuple[float, ...]]:
        return list(itertools.product(*self.grids)) if self.grids else [()]

    def hit(self, r: np.ndarray, theta: tuple[float, ...]) -> np.ndarray:
        return HIT[self.name](np.asarray(r, dtype=float), *theta)


def _clip(a, lo, hi):
    """np.clip's figures at a ufunc's cost (np.clip's own checks were a fifth of a fit's time)."""
    return np.minimum(np.maximum(a, lo), hi)


def _lru(r):
    return (r <= 1.0).astype(float)


def _modulo(r, a):
    return np.where(r <= 1.0, 1.0, np.maximum(0.0, 1.0 - a * (r - 1.0)) / np.maximum(r, 1.0))


def _cliff_tail(r, a, p):
    return np.where(r <= 1.0, 1.0, a * np.maximum(r, 1.0) ** -p)


def _cliff_shelf(r, a, k):
    z = _clip(np.log(np.maximum(r, 1e-300) / k) / 0.03, -700, 700)
    return np.where(r <= 1.0, 1.0, a / (1.0 + np.exp(z)))


def _random_tail(r):
    h = np.ones_like(r)
    past = r > 1.0
    if np.any(past):
        x = r[past]
        h[past] = np.real(-lambertw(-x * np.exp(-x))) / x
    return h


def _plru(r, d, k, w=0.03):
    start = 1.0 - 0.05 * _clip((r - 0.9) / 0.1, 0.0, 1.0)
    sag = np.where(r < 1.0, start, 0.95 * np.maximum(r, 1e-12) ** -d)
    z = _clip(np.log(np.maximum(r, 1e-300) / k) / w, -700, 700)
    return sag / (1.0 + np.exp(z))


def _hashed(r, s):
    z = _clip(np.log(np.maximum(r, 1e-300)) / s, -700, 700)
    return 1.0 / (1.0 + np.exp(z))


def _ways(r, a):
    return gammaincc(a, a * np.maximum(r, 0.0))


def _random_fixed_point(x: np.ndarray) -> np.ndarray:
    h = np.ones_like(x, dtype=float)
    past = x > 1.0
    if np.any(past):
        h[past] = np.real(-lambertw(-x[past] * np.exp(-x[past]))) / x[past]
    return h


@functools.lru_cache(maxsize=64)
def _random_ways_table(a: float) -> np.ndarray:
    """h on TABLE_LNR for ``a`` ways (its sum over loads is costly; every fit reads it many times)."""
    return _random_ways_direct(np.exp(TABLE_LNR), a)


def _random_ways(r, a):
    lnr = np.log(np.maximum(r, 1e-300))
    return np.interp(lnr, TABLE_LNR, _random_ways_table(float(a)))


TABLE_LNR = np.linspace(-4.0, 2.5, 1301)


def _random_ways_direct(r, a):
    """The sum over set loads, each r on the window of loads its Poisson puts weight on."""
    lam = a * np.maximum(np.asarray(r, dtype=float), 0.0)
    out = np.empty_like(lam)
    flat_lam, flat_out = lam.reshape(-1), out.reshape(-1)
    for start in range(0, flat_lam.size, 256):
        chunk = flat_lam[start:start + 256]
        lo = max(0, int(np.floor(chunk.min() - 9 * math.sqrt(chunk.min() + 1) - 4)))
        hi = int(np.ceil(chunk.max() + 9 * math.sqrt(chunk.max() + 1) + 8))
        k = np.arange(lo, hi + 1, dtype=float)      # other lines in the set
        per_load = _random_fixed_point((k + 1) / a)
        logp = k * np.log(np.maximum(chunk[:, None], 1e-300)) - chunk[:, None] - gammaln(k + 1)
        flat_out[start:start + 256] = (np.exp(logp) * per_load).sum(-1)
    return np.clip(out, 0.0, 1.0)


HIT = {"lru": _lru, "modulo": _modulo, "cliff_tail": _cliff_tail, "cliff_shelf": _cliff_shelf, "random": _random_tail, "plru": _plru,
       "hashed": _hashed, "ways": _ways,
       "random_ways": _random_ways}

MODELS = (
    HitModel("lru", "cliff", True),
    # modulo's sets overflow one by one from C: held at a measured size, a modulo L1 whose first
    # size past C ran 4% slow read 2-10% large, as a hashed fall's middle (physics GPUs 18, 22, 97)
    HitModel("modulo", "cliff, sets overflowing one by one", True, (tuple(float(2 ** k) for k in range(1, 8)),),
             between_sizes=True),
    HitModel("cliff_tail", "cliff, then partial hits", True,
             (tuple(np.round(np.linspace(0.05, 0.95, 10), 4)), tuple(np.round(np.geomspace(0.4, 6.0, 8), 4)))),
    HitModel("cliff_shelf", "cliff, then partial hits", True,
             (tuple(np.round(np.linspace(0.1, 0.95, 10), 4)), tuple(np.round(np.geomspace(1.1, 3.0, 10), 4)))),
    HitModel("random", "random-replacement tail", True, between_sizes=True),
    HitModel("plru", "decline, then collapse", False,
             (tuple(np.round(np.geomspace(0.15, 1.5, 8), 4)), tuple(np.round(np.geomspace(1.25, 3.2, 11), 4)))),
    # the logistic's width up to 0.125, a 24-way LRU cache's: a broader fall is few-way LRU or
    # random replacement (the ways models), whose C means the bytes held where its middle does not
    HitModel("hashed", "hashed-set fall", False, (tuple(np.round(np.geomspace(0.004, 0.35, 14), 5))[:11],)),
    HitModel("ways", "hashed-set fall", False, (tuple(float(2 ** k) for k in range(1, 11)),)),
    HitModel("random_ways", "random replacement, hashed sets", False, (tuple(float(2 ** k) for k in range(1, 8)),)),
)
BY_NAME = {m.name: m for m in MODELS}
# device caches (an L2, a last-level cache) have 8 ways or more: a fall as broad as a 4-way LRU
# cache's is what random replacement draws too, with C half again smaller, so only random
# replacement keeps it (physics GPU 19 seed 2: a 4-way LRU fit read its random L2 27% large)
# ... and hash their lines over slices and sets: address-bit sets (modulo) are a per-SM/CU cache's,
# and a device fall's modulo reading, a narrow fall's stand-in, keeps its C at a measured size
# (with C free, the H200 L2's hashed fall read as sets overflowing one by one)
DEVICE_MIN_WAYS = 8
# (a modulo fall's sets overflow over C / A: from 8 ways a narrow fall, so a broad hashed fall's
# middle is not read as sets overflowing from 14% under it: mi210 seed 6, keyed noise)


def _device(m: HitModel) -> HitModel:
    if m.name in ("ways", "random_ways", "modulo"):
        m = dataclasses.replace(m, grids=(tuple(a for a in m.grids[0] if a >= DEVICE_MIN_WAYS),))
    return dataclasses.replace(m, between_sizes=False) if m.name == "modulo" else m


DEVICE_MODELS = tuple(_device(m) for m in MODELS
                      if m.name in ("lru", "modulo", "random", "hashed", "ways", "random_ways"))


SPLIT_HALVES = {"split": "hashed", "split_ways": "ways", "split_random": "random_ways"}   # how each
                                # split level's halves fall (detector.splitfit)


def hit_curve(name: str, r: np.ndarray, theta: tuple[float, ...]) -> np.ndarray:
    """The model's hit rate; a split level's is the whole level's fall at its end, as its halves
    fall (SPLIT_HALVES: detector.splitfit)."""
    return BY_NAME[SPLIT_HALVES.get(name, name)].hit(r, theta)


def crossing_ratio(name: str, theta: tuple[float, ...], level: float) -> float | None:
    """Smallest r >= 0.3 where the model's hit rate drops below ``level`` (None: never, within 8 C)."""
    r = np.geomspace(0.3, 8.0, 2000)
    h = hit_curve(name, r, theta)
    below = np.nonzero(h < level)[0]
    return float(r[below[0]]) if below.size else None


LN10 = math.log(10.0)
