"""Doubts: why a result may be incomplete, each one sentence with its remedy. A doubtful run is
not a measurement a CI job should take at its word: the command line prints its doubts on
stderr and exits 2 ("result incomplete") unless ``--accept-incomplete`` is given.

- a sweep stopped before its coarse pass reached the largest size it planned (the budget ran
  out): levels past that size are missing or misread;
- a sweep that ran found no level of its own, or the shared sweep ended without a plateau of main
  memory (a level was never left behind: its capacity is unknown);
- a level's confidence is below LOW_CONFIDENCE.

Confidence (0 to 1, per level): for a cache, how clearly its fall stands out from the noise,
how narrow the interval of its capacity is, how well the fall's shape fits the points, how
repeatable the capacity is, whether a second segmentation agrees, less the share of noisy points
at the boundary, raised where the latency knee agrees; for memory, how many points its plateau
has and how flat it is. On real H200 runs the L2's broad hashed fall reads the lowest; a level
below 0.2 is not a reading to compare."""
from __future__ import annotations

from detect_caches.reports.fmt import fmt_bytes

LOW_CONFIDENCE = 0.2
MEMORY = ("HBM", "DRAM")


def find_doubts(result: dict) -> list[str]:
    levels = result.get("levels", [])
    method = result.get("method") or {}
    sweeps = method.get("sweeps") or {}
    doubts = []
    for name, sw in sweeps.items():
        largest, planned = sw.get("largest_stream_bytes"), sw.get("max_stream_bytes")
        if largest and planned and largest < 0.99 * planned:
            doubts.append(f"the {name} sweep stopped at {fmt_bytes(largest)} per program of the {fmt_bytes(planned)} "
                          f"it planned: the budget ran out before its coarse pass ended (raise --budget)")
    latency = method.get("latency") or {}
    largest, planned = latency.get("largest_chain_bytes"), latency.get("max_chain_bytes")
    if largest and planned and largest < 0.99 * planned:
        doubts.append(f"the latency sweep stopped at a chain of {fmt_bytes(largest)} of the {fmt_bytes(planned)} "
                      f"it planned: the budget ran out (raise --budget, or --no-latency)")
    for name in sweeps:
        if levels and not any(lv.get("sweep") == name for lv in levels):
            doubts.append(f"the {name} sweep found no level of its own: its levels are missing")
    for lv in levels[:-1] if levels and levels[-1].get("name") in MEMORY else levels:
        if lv.get("capacity_bytes") is None and lv.get("name") not in MEMORY:
            doubts.append(f"{lv.get('name')} was never left behind within the sweep: its capacity is unknown")
    if "shared" in sweeps and levels and levels[-1].get("name") not in MEMORY:
        last = levels[-1]
        doubts.append(f"the shared sweep ended without a plateau of main memory (the last level is "
                      f"{last.get('name')}): a level that is never left behind has no capacity; lift "
                      f"--max-working-set or --budget")
    for lv in levels:
        conf = lv.get("confidence")
        if isinstance(conf, (int, float)) and conf < LOW_CONFIDENCE:
            doubts.append(f"{lv.get('name')}'s confidence is {conf:.2f}, below {LOW_CONFIDENCE}: its figures are "
                          f"not a reading to compare (see the warnings)")
    return doubts
