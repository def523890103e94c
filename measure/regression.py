"""The seed's load-iteration regression: avg_ms = intercept_ms + slope_ms * load_iters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class IterationFit:
    slope_ms: float       # ms per pass over the working set
    intercept_ms: float   # launch overhead, loop set-up, the final store
    r2: float
    slope_stderr_ms: float

    def bandwidth_gbs(self, bytes_per_pass: int) -> float:
        """Decimal GB/s moved by the loads alone: bytes per pass / slope."""
        if not self.slope_ms > 0:
            return float("nan")
        return bytes_per_pass / (self.slope_ms * 1e-3) / 1e9


def fit_load_iterations(load_iters: Sequence[int], avg_ms: Sequence[float]) -> IterationFit:
    """Ordinary least squares of time against load_iters (numpy only)."""
    x = np.asarray(load_iters, dtype=float)
    y = np.asarray(avg_ms, dtype=float)
    if x.shape != y.shape or x.size < 2 or np.ptp(x) == 0:
        raise ValueError("the regression needs at least two distinct load_iters values")
    if not np.all(np.isfinite(y)):
        raise ValueError("timings must be finite")
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    intercept = float(ym - slope * xm)
    resid = y - (intercept + slope * x)
    ss_res = float((resid ** 2).sum())
    ss_tot = float(((y - ym) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0
    dof = x.size - 2
    stderr = float(np.sqrt(ss_res / dof / sxx)) if dof > 0 else float("nan")
    return IterationFit(slope, intercept, r2, stderr)
