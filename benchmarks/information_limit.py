"""How closely any estimator can place a level's capacity from N bandwidth points: the Cramér-Rao
bound of the level's own fall model (detector.hitmodels) at the profile's noise, beside the
spread of the tool's fit (detector.fallfit) over noisy copies of the same points. SIMULATED: the
curve is the model's, the noise the profile's.

    python benchmarks/information_limit.py --profile mi300x --level L1 --points 40 80 160

A level whose bound is wider than a target cannot meet it at that many points, whatever the
analysis does: the mi300x L1 (a 1.4x pseudo-LRU decline under 1.5% noise) is such a level.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from detect_caches.detector.fallfit import fit_fall
from detect_caches.detector.hitmodels import BY_NAME

ROOT = Path(__file__).resolve().parents[1]
STEP = 1e-4          # the parameters' step for the numerical derivatives
WINDOW = (0.5, 3.0)  # the points' sizes, in capacities (a fit's window reaches this far either side)


def fall_model(level: dict) -> tuple[str, tuple[float, ...]]:
    """The hit-rate model and its shape parameters for a simulated level's transition."""
    t = level.get("transition", "hashed")
    if t == "plru":
        return "plru", (level.get("decline_power", 0.5), level.get("collapse_ratio", 1.7))
    if t == "hashed":
        return "hashed", (level.get("width", 0.05),)
    if t == "cliff_tail":
        return "cliff_tail", (level.get("tail_hit", 0.6), level.get("tail_power", 1.5))
    if t in ("sharp", "random"):
        return {"sharp": "lru", "random": "random"}[t], ()
    raise SystemExit(f"transition {t!r} has no fall model here")


def predicted(model: str, params: np.ndarray, ratios: np.ndarray) -> np.ndarray:
    """log10 bandwidth at working sets ``ratios`` (in true capacities): params = (ln C, log10 of
    the level's speed, log10 of the level below's, shape parameters...)."""
    h = BY_NAME[model].hit(ratios / math.exp(params[0]), tuple(params[3:]))
    return -np.log10(h * 10.0 ** -params[1] + (1 - h) * 10.0 ** -params[2])


def jacobian(model: str, params: np.ndarray, ratios: np.ndarray) -> np.ndarray:
    """d log10 bandwidth / d params at each of ``ratios`` (central differences)."""
    jac = np.empty((ratios.size, params.size))
    for i in range(params.size):
        step = np.zeros(params.size)
        step[i] = STEP
        jac[:, i] = (predicted(model, params + step, ratios) - predicted(model, params - step, ratios)) / (2 * STEP)
    return jac


def bound(model: str, params: np.ndarray, ratios: np.ndarray, noise_log: float) -> float:
    """The Cramér-Rao bound on the spread of ln C (1 sigma): every other parameter free."""
    jac = jacobian(model, params, ratios)
    return noise_log * math.sqrt(float(np.linalg.pinv(jac.T @ jac)[0, 0]))


def tool_spread(model: str, params: np.ndarray, ratios: np.ndarray, noise: float, *, trials: int,
                seed: int) -> tuple[float, float]:
    """(spread of ln C, worst |error|) of the tool's fit over ``trials`` noisy copies."""
    rng = np.random.default_rng(seed)
    capacity_bytes = 32768.0
    sizes = ratios * capacity_bytes
    clean = predicted(model, params, ratios)
    logs = []
    for _ in range(trials):
        y = clean + rng.normal(0.0, noise, ratios.size) / math.log(10)
        fit = fit_fall(sizes, y, sigma_point=noise / math.log(10), resamples=0)
        logs.append(math.log(fit.capacity_bytes / capacity_bytes))
    logs = np.array(logs)
    return float(np.std(logs)), float(np.max(np.abs(np.expm1(logs))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="mi300x")
    ap.add_argument("--level", default="L1")
    ap.add_argument("--points", type=int, nargs="+", default=[40, 80, 160])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = json.loads((ROOT / "measure" / "sim" / "profiles" / f"{args.profile}.json").read_text())
    levels = spec["levels"]
    k = next((i for i, lv in enumerate(levels) if lv["name"] == args.level and lv.get("capacity_bytes")), None)
    if k is None:
        raise SystemExit(f"{args.profile} has no cache level {args.level!r}")
    model, theta = fall_model(levels[k])
    params = np.array([0.0, math.log10(levels[k]["bandwidth_gbs"]), math.log10(levels[k + 1]["bandwidth_gbs"]), *theta])
    noise = float(spec.get("noise", 0.01))
    print(f"SIMULATED {args.profile} {args.level}: {model} {theta}, "
          f"{levels[k]['bandwidth_gbs'] / levels[k + 1]['bandwidth_gbs']:.2f}x, noise {noise:.1%}; "
          f"points spread over {WINDOW[0]}-{WINDOW[1]} capacities")
    print(f"{'points':>7} {'bound (1 sigma)':>16} {'tool (1 sigma)':>15} {'tool worst':>11}")
    for n in args.points:
        ratios = np.geomspace(*WINDOW, n)
        sd, worst = tool_spread(model, params, ratios, noise, trials=args.trials, seed=args.seed)
        print(f"{n:>7} {bound(model, params, ratios, noise / math.log(10)):>15.1%} {sd:>15.1%} {worst:>11.1%}")


if __name__ == "__main__":
    main()
