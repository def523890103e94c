"""The report's glossary: what each figure means, one or two sentences a term, and the fall
shapes that appear in the result (their words come from detector.shape_rules)."""
from __future__ import annotations

from detect_caches.detector.shape_rules import SHAPE_RULES

TERMS = [
    ("Size (measured)", "The bytes a level holds, read from where its bandwidth falls as the working set "
     "grows (the fitted fall, below). It counts per SM/CU, per XCD or for the whole device, as its row says."),
    ("Documented size", "What the driver API or the vendor states for the level. It is shown beside the "
     "measured size, never in its place; the two need not agree."),
    ("Interval", "Where the true size can lie, given the points measured (98%, from the fitted models)."),
    ("Bandwidth", "The level's plateau with the sweep's launch, in decimal TB/s. Tuned peak: the best of a "
     "few other launches inside the plateau. Share of ceiling: the bandwidth over the level's physical "
     "ceiling, where one is published."),
    ("Latency", "One SM/CU following a chain of dependent loads. A level seen in two steps shows both "
     "(near/far: the two halves of a split L2)."),
    ("Line / sector", "Line: the bytes a cache line holds. Sector: what one miss brings in (the L1), or the "
     "unit the level hands on (the L2). A dash: not measured, or not conclusive."),
    ("Repeatability", "How much a figure moves between runs on the same card (1 sigma), estimated inside "
     "the run. A comparison calls a change drift only beyond 3 times it and the tolerance."),
    ("Confidence", "From 0 to 1: how clearly the level's fall stands out from the noise, how narrow its "
     "interval is, how well its shape fits, and whether the latency knee agrees. Below 0.2 the result is "
     "doubtful."),
]


def shapes_in(result: dict) -> list[str]:
    """The fall shapes the result's levels (and carveouts) show, in table order."""
    seen = {lv.get("fall_shape") for lv in result.get("levels", [])}
    seen |= {row.get("fall_shape") for row in result.get("carveouts") or []}
    known = [s for s in SHAPE_RULES if s in seen]
    return known + sorted(s for s in seen if s and s not in SHAPE_RULES)


def shape_text(shape: str) -> str:
    rule = SHAPE_RULES.get(shape)
    if rule is None:
        return "A fall this version does not describe."
    return f"{rule[0]} The size is {rule[1]}."


def entries(result: dict) -> list[tuple[str, str]]:
    """(term, text) pairs: the terms, then each fall shape the result shows."""
    return TERMS + [(f"Fall: {shape}", shape_text(shape)) for shape in shapes_in(result)]


def markdown(result: dict) -> list[str]:
    return ["## Glossary", ""] + [f"- **{term}**: {text}" for term, text in entries(result)] + [""]
