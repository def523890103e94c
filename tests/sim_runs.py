"""Seeded simulator runs as result.json content, cached for the whole test session (the drift
and fleet tests reuse each other's runs)."""
import copy
import functools
import json

from detect_caches.records import MeasurementLog
from detect_caches.measure.session import SessionOptions
from detect_caches.measure.sim.simulated import SimulatedGPU, parse_profile
from detect_caches.pipeline.api import sweep_and_detect
from detect_caches.reports.result_json import build_result
from sim_profiles import ACCURACY_PROFILES


def changed(spec: dict, *, seed: int, level: str | None = None, capacity: float = 1.0,
            bandwidth: float = 1.0) -> dict:
    """``spec`` with one level's capacity and/or bandwidth scaled, run with ``seed``."""
    out = copy.deepcopy(spec)
    out["seed"] = seed
    for lv in out["levels"]:
        if lv["name"] == level:
            if lv.get("capacity_bytes"):
                lv["capacity_bytes"] = int(round(lv["capacity_bytes"] * capacity))
            lv["bandwidth_gbs"] = lv["bandwidth_gbs"] * bandwidth
    return out


@functools.lru_cache(maxsize=None)
def _run(spec_json: str) -> str:
    prof = parse_profile(json.loads(spec_json))
    log = MeasurementLog(None)
    _, det, _ = sweep_and_detect(SimulatedGPU(prof), log, SessionOptions(peak_budget=0))
    return json.dumps(build_result(det, prof.facts, measurements=len(log.records), elapsed_s=0.0,
                                   method={}, extra_warnings=[]))


def result_of(spec: dict) -> dict:
    return json.loads(_run(json.dumps(spec, sort_keys=True)))


def run_profile(name: str, seed: int, **change) -> dict:
    return result_of(changed(ACCURACY_PROFILES[name], seed=seed, **change))
