"""The physics GPUs (tests/physics_generator.py): valid profiles, truths of whole sets, every
replacement and indexing drawn, the same GPU for the same number."""
from __future__ import annotations

import re

from cache_physics import INDEXINGS
from detect_caches.measure.sim.simulated import parse_profile
from physics_generator import draw_gpu, expected_levels
from set_replacement import POLICIES

GEOMETRY = re.compile(r"^(\w+) (\w+)(?: \d+ KiB pages)? (\d+)w (\d+)B x (\d+) sets$")


def test_physics_gpus_are_valid_profiles_with_caches_of_whole_sets():
    seen = set()
    for k in range(30):
        spec = draw_gpu(k)
        profile = parse_profile(spec, source=spec["name"])
        caches = [lv for lv in spec["levels"] if lv.get("capacity_bytes")]
        assert [lv.transition for lv in profile.levels[:-1]] == ["table"] * len(caches)
        for lv in caches:
            replacement, indexing, ways, line_bytes, sets = GEOMETRY.match(lv["physics"]).groups()
            assert lv["capacity_bytes"] == int(sets) * int(ways) * int(line_bytes)
            assert dict(expected_levels(spec))[lv["name"]] == lv["capacity_bytes"]
            hits = [h for _, h in lv["hit_table"]]
            assert hits[-1] < 0.05 < 0.9 < hits[0]    # the whole fall is inside the table
            seen.add((replacement, indexing))
    assert seen == {(r, i) for r in POLICIES for i in INDEXINGS}


def test_a_physics_gpu_is_the_same_for_the_same_number():
    assert draw_gpu(3) == draw_gpu(3)
    assert draw_gpu(3) != draw_gpu(4)
