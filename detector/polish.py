"""A small bounded Levenberg-Marquardt for the fits' polish: one to three parameters, residuals
of a few dozen points. scipy's least_squares (trf) spent most of a fit's time on its own
bookkeeping at this size; this does the same job with numpy alone."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

STEP = 1.5e-8          # forward-difference step, relative (sqrt of the float epsilon)


@dataclass
class Polished:
    x: np.ndarray          # the parameters at the least cost found
    fun: np.ndarray        # the residuals there
    jac: np.ndarray        # their Jacobian there (points x parameters)
    nfev: int


def jacobian(fun: Callable, x: np.ndarray, f0: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> np.ndarray:
    """Forward differences, stepping back from an upper bound."""
    J = np.empty((f0.size, x.size))
    for i in range(x.size):
        h = STEP * max(1.0, abs(x[i]))
        if x[i] + h > ub[i]:
            h = -h
        xi = x.copy()
        xi[i] += h
        J[:, i] = (fun(xi) - f0) / h
    return J


def polish(fun: Callable, x0, lb, ub, *, ftol: float = 1e-6, xtol: float = 1e-6,
           max_nfev: int = 80) -> Polished:
    """Least squares of ``fun`` from ``x0`` within [lb, ub]: Marquardt steps (damping scaled by
    the normal matrix's diagonal), each clipped to the bounds, until the cost falls by less than
    ``ftol`` of itself or the step is below ``xtol`` of the parameters."""
    lb, ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)
    x = np.clip(np.asarray(x0, dtype=float), lb, ub)
    f = fun(x)
    cost = float(f @ f)
    nfev, lam = 1, 1e-3
    J = jacobian(fun, x, f, lb, ub)
    nfev += x.size
    while nfev < max_nfev:
        A, g = J.T @ J, J.T @ f
        scale = np.maximum(np.diag(A), 1e-12)
        moved = False
        while nfev < max_nfev:
            try:
                step = np.linalg.solve(A + lam * np.diag(scale), -g)
            except np.linalg.LinAlgError:
                lam *= 10
                if lam > 1e10:
                    return Polished(x, f, J, nfev)
                continue
            x_new = np.minimum(np.maximum(x + step, lb), ub)
            f_new = fun(x_new)
            nfev += 1
            cost_new = float(f_new @ f_new)
            if cost_new < cost:
                done = (cost - cost_new <= ftol * cost
                        or np.all(np.abs(x_new - x) <= xtol * (xtol + np.abs(x))))
                x, f, cost, moved = x_new, f_new, cost_new, True
                lam = max(lam / 3, 1e-12)
                break
            lam *= 4
            if lam > 1e10 or np.all(np.abs(x_new - x) <= xtol * (xtol + np.abs(x))):
                return Polished(x, f, J, nfev)
        if not moved:
            break
        J = jacobian(fun, x, f, lb, ub)
        nfev += x.size
        if done:
            break
    return Polished(x, f, J, nfev)
