"""The fits' polishes spread over worker processes (pipeline.fitpool, detector.fitmap) give the
figures the analysing process gives alone, on a real H200 run; a worker lost on the way sends
the polishes back home with the same figures; the pool leaves no process behind."""
import os

import pytest

from detect_caches.detector.analyze import detect_levels
from detect_caches.detector.fitmap import polished_by
from detect_caches.device import load_device_json
from detect_caches.pipeline.fitpool import FitPool, pool_for, workers_for
from detect_caches.reader import read_measurements
from h200_runs import H200

RUN = H200 / "2026-12-05" / "after" / "run2"

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the pool reads its workers' pipes with select")


def _levels(polisher=None):
    records, facts = read_measurements(RUN / "measurements.csv"), load_device_json(RUN / "result.json")
    with polished_by(polisher):
        det = detect_levels(records, facts)
    return [lv.to_dict() for lv in det.levels], det


def test_polishes_in_workers_give_the_same_levels():
    alone, _ = _levels()
    pool = FitPool(2)
    try:
        spread, det = _levels(pool)
        assert not pool.lost and pool.calls >= 6        # every fall's polishes went to the workers
    finally:
        pool.close()
    assert spread == alone
    assert det.levels[0].capacity_bytes == alone[0]["capacity_bytes"] > 0


def test_a_lost_worker_sends_the_polishes_home():
    alone, _ = _levels()
    pool = FitPool(2)
    procs = [proc for proc, _ in pool._procs]
    procs[1].kill()
    procs[1].wait()
    try:
        again, _ = _levels(pool)
        assert pool.lost.startswith("a fit worker was lost")
    finally:
        pool.close()
    assert again == alone
    assert all(p.poll() is not None for p in procs)      # none left running


def test_a_polish_that_fails_in_a_worker_fails_at_home_alike():
    """A polish that raises: the pool says so and is set aside; the analysing process meets the
    same error polishing it again (from a review: the reason read 'the worker ended')."""
    from detect_caches.detector.fitmap import polish_each
    from detect_caches.detector.hitmodels import BY_NAME
    pool = FitPool(2)
    items = [("not a window", BY_NAME["lru"], None)] * 2
    try:
        with polished_by(pool), pytest.raises(AttributeError):
            polish_each(items)
        assert pool.lost.startswith("a fit worker was lost (RuntimeError: a polish failed in a worker: AttributeError")
    finally:
        pool.close()


def test_workers_that_cannot_start_leave_the_polish_at_home(monkeypatch):
    monkeypatch.setattr("sys.executable", None)
    pool = FitPool(2)
    assert pool.lost.startswith("the fit workers did not start") and not pool._procs
    with pytest.raises(RuntimeError):
        pool([])


def test_how_many_workers(monkeypatch):
    for key in ("DETECT_CACHES_FIT_WORKERS", "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        monkeypatch.delenv(key, raising=False)
    assert workers_for(2) == 0 and workers_for(4) == 2 and workers_for(16) == 8 and workers_for(None) == 0
    # a node's runs share its cores: eight GPUs' runs on 16 cores get none, two get 7 each
    assert workers_for(16, 8) == 0 and workers_for(16, 2) == 7 and workers_for(128, 8) == 8
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert workers_for(16) == 3
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "8(x2)")
    assert workers_for(32) == 3
    os.environ["DETECT_CACHES_FIT_WORKERS"] = "0"
    try:
        assert workers_for(64) == 0
        assert pool_for(load_device_json(RUN / "result.json")) is None
    finally:
        del os.environ["DETECT_CACHES_FIT_WORKERS"]


def test_a_simulated_run_polishes_at_home():
    from detect_caches.measure.sim.simulated import SimulatedGPU
    from detect_caches.measure.sim.profile import load_profile
    assert pool_for(SimulatedGPU(load_profile("h100")).facts) is None
