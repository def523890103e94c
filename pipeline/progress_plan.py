"""The work a run plans, stage by stage, for the progress bar's total: each sweep's coarse sizes
(measure.session's plans) and the refinement that usually follows them, the probes' shares.
The budget is only a ceiling: a run ends well before it, and a bar whose total is the budget
stops at half. Each stage's estimate is replaced by its count once it is done
(pipeline.progress), so the total converges on what was measured."""
from __future__ import annotations

from detect_caches.pipeline.progress import STAGES

# measurements a sweep takes per coarse size, refinement included: the built-in profiles' runs
# took 2.0-3.6x on the private sweep (the cliff walk), 1.3-2.4x on the shared one
REFINED = {"private": 3.2, "shared": 2.0}
CHASE_REFINED = 20       # points the chase adds to its coarse sizes at the knees
PER_CARVEOUT = 36        # a carveout's window sweep, refined, and its chase


def planned(device, opts) -> dict[str, int]:
    """Stage name (as pipeline.progress shows it) -> the measurements it is expected to take."""
    from detect_caches.measure.latency import CHASE_CONFIG, plan_latency
    from detect_caches.measure.session import LATENCY_PROBE_SHARE, plan_sweeps
    from detect_caches.measure.sweep import SweepPlan
    cap = device.max_working_set_bytes()
    if opts.max_working_set_bytes:
        cap = min(cap, opts.max_working_set_bytes)
    plans, _ = plan_sweeps(device.facts, opts, cap)
    out = {STAGES[p.config.sweep]: min(p.budget, round(REFINED.get(p.config.sweep, 2.0) * len(p.coarse_sizes())))
           for p in plans}
    if opts.latency_budget:
        lat = plan_latency(device.facts, cap, max(opts.latency_budget - LATENCY_PROBE_SHARE, 10))
        chase = SweepPlan(CHASE_CONFIG, lat.min_bytes, lat.max_bytes, lat.points_per_octave, lat.budget,
                          large_bytes=4 << 20, large_points_per_octave=1)
        out[STAGES["chase"]] = min(lat.budget, len(chase.coarse_sizes()) + CHASE_REFINED)
        out["sector and line probes"] = LATENCY_PROBE_SHARE
    if opts.peak_budget:
        out["peak probes"] = opts.peak_budget
    if getattr(opts, "carveouts", None):
        out["carveout sweeps"] = PER_CARVEOUT * max(len(opts.carveouts) - 1, 1)
    return out
