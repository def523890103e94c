"""The budget is a ceiling on a whole run: sweeps, refining rounds, latency sweep and probes,
peak probes (SIMULATED)."""
import json

import pytest

from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
from detect_caches.pipeline.api import characterize


@pytest.mark.parametrize("budget", [200, 260])
def test_refining_rounds_leave_the_probes_their_share_of_the_budget(budget):
    """The built-in mi210, seed 7 (a noisy L2 that asks for every round): the rounds took the
    21 measurements kept for the sector and line probes, 221 measurements on a budget of 200."""
    from accuracy import builtin_spec
    from detect_caches.measure.sim.profile import BUILTIN_PROFILES
    spec = dict(builtin_spec(BUILTIN_PROFILES.index("mi210")), seed=7)
    r = characterize(device=SimulatedGPU(parse_profile(spec)), budget=budget)
    n = len(r.records)
    assert n == r.data["measurements"] and n <= budget, (n, json.dumps(r.data["method"].get("interval_refine")))
    assert r.data["method"].get("interval_refine", {}).get("measurements", 0) > 0
