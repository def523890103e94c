"""What each fall shape means, in words: how the bandwidth falls past the level's size and which
figure of the fall is the capacity. One table for the detector's notes and the reports'
glossary (detector.hitmodels fits the models these shapes name)."""
from __future__ import annotations

# shape -> (what the fall looks like, which figure is the capacity)
SHAPE_RULES = {
    "cliff": ("An LRU cache without conflicts: every line hits up to the size, none past it.",
              "the last size served whole"),
    "cliff, sets overflowing one by one": (
        "An LRU cache whose sets are picked by address bits: past the size the sets overflow one by "
        "one, each then missing on all its lines.", "the last size served whole"),
    "cliff, then partial hits": ("A cliff at the size onto partial hits that fade as the working set grows.",
                                 "the last size served whole"),
    "random-replacement tail": ("Random replacement: everything hits up to the size, then a long tail of "
                                "partial hits.", "where the tail starts, the last size served whole"),
    "decline, then collapse": ("Pseudo-LRU replacement: the hit rate sags slowly from just below the size, "
                               "then collapses.", "where 95% of the data still hits"),
    "hashed-set fall": ("An LRU cache whose sets are picked by an address hash: some sets overflow before "
                        "the cache is full and some after, so the fall is symmetric around the size.",
                        "the middle of the fall, where about half the data hits"),
    "random replacement, hashed sets": ("Random replacement inside hashed sets: a broad fall that starts "
                                        "before the size and ends well past it.",
                                        "the bytes the sets hold together, inside the fall"),
    "split level (near and far half)": ("A level in two halves at different distances from each SM (the "
                                        "far half slower), seen as two falls.",
                                        "the middle of the hashed fall at its end"),
    "step": ("No measured size lies inside the fall: the next size measured is already past it.",
             "the last size served whole"),
    # shapes of results made before the fitted models (schema 1 and 2)
    "tail": ("A fall that starts abruptly and keeps partial hits long after (older results).",
             "where the tail starts"),
    "broad fall": ("A symmetric fall too broad for a hashed LRU cache (older results).", "where the fall begins"),
}


def capacity_rule(shape: str) -> str:
    """"the capacity is ..." for a shape; a plain sentence for one this table does not know."""
    rule = SHAPE_RULES.get(shape)
    return f"the capacity is {rule[1]}" if rule else "the capacity is read from the fitted fall"
