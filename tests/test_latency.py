"""The latency chase: the chain is one cycle over every line and the kernel walks it (interpreter),
the compiled loop is one dependent load per hop (cross-compiled), and on the simulator the
latencies, line and sector sizes and the H200's near and far L2 halves come back."""
import json
from pathlib import Path

import numpy as np
import pytest
from cross import run_cross

from detect_caches.measure.chains import ChainSpec, build_host_chain, is_one_cycle, walk_host_chain
from h200_runs import H200

ROOT = Path(__file__).resolve().parents[1]
KIB, MIB = 1024, 1024 * 1024


@pytest.mark.parametrize("elements,slot,sequential", [(37, 64, False), (500, 64, False), (64, 512, False),
                                                      (200, 8, True), (3, 128, False)])
def test_chain_is_one_cycle_over_every_element(elements, slot, sequential):
    spec = ChainSpec(elements, slot, sequential=sequential, seed=elements)
    buf = np.zeros(spec.span_bytes // 8, dtype=np.int64)
    base = 1 << 40
    start = build_host_chain(spec, base, buf)
    assert is_one_cycle(spec, buf, base, start)
    assert walk_host_chain(buf, base, start, elements) == start


def test_interpreter_kernel_walks_the_chain():
    """The Triton kernel (in the interpreter) stands where a host walk of the same chain stands,
    after the warm-up and the timed hops: every hop follows the chain."""
    import torch
    from detect_caches.measure.gpu.chase import chase_kernel
    spec = ChainSpec(97, 64, seed=3)
    buf = torch.zeros(spec.span_bytes // 8, dtype=torch.int64)
    base = buf.data_ptr()
    start = build_host_chain(spec, base, buf.numpy())
    out = torch.zeros(3, dtype=torch.int64)
    for warm, hops in ((0, 1), (97, 5), (10, 97), (97, 300)):
        chase_kernel[(1,)](start, out, warm, hops, L2ONLY=False, CLOCK=2, ASM=0)
        assert int(out[2]) == walk_host_chain(buf.numpy(), base, start, warm + hops)


def test_walks_cover_the_working_set():
    """A measurement warms up with a whole pass (every line touched) before it times; a chain
    past the caches is walked cold, a part at a time."""
    warm, hops = ChainSpec(5000).walk()
    assert warm == 5000 and hops >= 5000
    warm, hops = ChainSpec(100).walk()
    assert warm == 100 and hops >= 100 * 100   # short chains go round many times
    cold = ChainSpec(10, cold=True)
    assert cold.partial and cold.walk()[0] == 0


CROSS = r"""
import json, re, triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from detect_caches.measure.gpu.chase import chase_kernel
sig = {"start": "i64", "out_ptr": "*i64", "warm_hops": "i32", "hops": "i32", "L2ONLY": "constexpr",
       "CLOCK": "constexpr", "ASM": "constexpr"}
out = {}
for name, tgt, clock, asm in (("sm_90", GPUTarget("cuda", 90, 32), 0, 1), ("gfx942", GPUTarget("hip", "gfx942", 64), 1, 0)):
    for l2 in (False, True):
        k = triton.compile(ASTSource(fn=chase_kernel, signature=sig, constexprs={"L2ONLY": l2, "CLOCK": clock, "ASM": asm}),
                           target=tgt, options={"num_warps": 1})
        code = k.asm.get("ptx") or k.asm.get("amdgcn")
        out[f"{name}/{int(l2)}"] = [l.strip() for l in code.splitlines()
                                    if re.search(r"ld\.global|global_load|clock64|globaltimer|s_memtime|s_memrealtime|mad\.|shl\.|mul\.", l)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def chase_code():
    return run_cross(CROSS)


@pytest.mark.parametrize("l2,op", [(0, "ld.global.u64"), (1, "ld.global.cg.u64")])
def test_sm90_hop_is_one_load_of_its_own_address(chase_code, l2, op):
    lines = chase_code[f"sm_90/{l2}"]
    loads = [line for line in lines if line.startswith(op)]
    assert len(loads) == 2                                    # the warm-up loop and the timed loop
    for line in loads:
        dst, src = line.split()[1].rstrip(","), line.split("[")[1].rstrip("];")
        assert dst == src                                     # the loaded value is the next address
    assert not any(line.startswith(("mad.", "shl.", "mul.")) for line in lines)   # no index arithmetic
    assert any("%clock64" in line for line in lines) and any("%globaltimer" in line for line in lines)


def test_gfx942_hop_is_a_global_load(chase_code):
    for l2 in (0, 1):
        lines = chase_code[f"gfx942/{l2}"]
        assert sum("global_load_dwordx2" in line for line in lines) >= 2
        assert any("s_memtime" in line for line in lines)


# -- on the simulator ---------------------------------------------------------------------------

def _run(name):
    from detect_caches.detector.analyze import detect_levels
    from detect_caches.detector.latency import attach_lines, probe_targets
    from detect_caches.records import MeasurementLog
    from detect_caches.measure.session import SessionOptions, characterize, measure_latency, probe_latency_lines
    from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile
    prof = load_profile(name)
    log = MeasurementLog(None)
    opts = SessionOptions()
    session = characterize(SimulatedGPU(prof), log, opts)
    measure_latency(session, SimulatedGPU(prof), log, opts)
    det = detect_levels(log.records, prof.facts)
    probe_latency_lines(session, probe_targets(det.levels), log, opts)
    attach_lines(det.levels, log.records)
    return prof, det, len(log.records)


def test_h200_latencies_lines_and_l2_halves_recovered():
    prof, det, n = _run("h200")
    assert n <= 400
    by = {lv.name: lv for lv in det.levels}
    truth = {lv.name: lv for lv in prof.levels}
    for name in ("L1", "L2", "HBM"):
        assert abs(by[name].latency_ns / truth[name].latency_ns - 1) <= 0.05, (name, by[name].latency_ns)
        assert by[name].latency_cycles and abs(by[name].latency_cycles / (by[name].latency_ns * 1.98) - 1) < 0.05
    # the far half of the split L2, with its size: 240 ns up to the L2's capacity
    steps = by["L2"].latency_steps
    assert len(steps) == 2 and abs(steps[1]["latency_ns"] / 240 - 1) <= 0.05
    assert abs(steps[1]["up_to_bytes"] / truth["L2"].capacity_bytes - 1) <= 0.1
    assert steps[0]["up_to_bytes"] < 0.75 * truth["L2"].capacity_bytes
    for name in ("L1", "L2"):
        assert by[name].line_bytes == 128 and by[name].sector_bytes == 32
    # the latency knee of the L1 agrees with the bandwidth cliff within 2 KiB
    assert abs(by["L1"].latency_capacity_bytes - by["L1"].capacity_bytes) <= 2 * KIB


def test_mi300x_latencies_recovered():
    prof, det, _ = _run("mi300x")
    by = {lv.name: lv for lv in det.levels}
    for lv in prof.levels:
        assert abs(by[lv.name].latency_ns / lv.latency_ns - 1) <= 0.05, (lv.name, by[lv.name].latency_ns)
    assert by["L2"].line_bytes == 128


def test_analyze_reads_latency_rows(tmp_path):
    """A CSV of latency rows only (metric=latency, latency_ns, no bandwidth) next to bandwidth rows."""
    from detect_caches.reader import read_measurements
    p = tmp_path / "m.csv"
    rows = ["sweep,working_set_bytes,bandwidth_gbs,metric,latency_ns"]
    rows += [f"chase,{kib * 1024},,latency,{17.0 if kib < 200 else 140.0}" for kib in (16, 32, 64, 128, 256, 512, 1024)]
    rows += [f"private,{kib * 1024},{30000 if kib < 200 else 9000},bandwidth," for kib in (16, 32, 64, 128, 256, 512, 1024)]
    p.write_text("\n".join(rows) + "\n")
    recs = read_measurements(p)
    chase = [r for r in recs if r.metric == "latency"]
    assert len(chase) == 7 and all(r.sweep == "chase" and r.latency_ns > 0 for r in chase)
    assert chase[0].bandwidth_gbs == pytest.approx(64 / 17.0)


def test_no_latency_option(tmp_path):
    from detect_caches import main
    assert main(["--simulate", "h200", "--no-latency", "--no-peaks", "--quiet", "--out", str(tmp_path / "r")]) == 0
    result = json.loads((tmp_path / "r" / "result.json").read_text())
    assert all(lv["latency_ns"] is None for lv in result["levels"])
    assert "latency" not in (tmp_path / "r" / "measurements.csv").read_text().split("\n", 2)[1]


def _real_h200_curve():
    """gpu-latency on an H200 (this project's GPU machine, 2026-11-30): (bytes, ns per hop)."""
    rows = []
    for line in (Path(__file__).parent / "data" / "h200_gpu_latency.txt").read_text().splitlines():
        t = line.split()
        if len(t) == 5 and t[0].isdigit():
            rows.append((float(t[2]) * 1024, float(t[3]) * 1e6 / float(t[0])))
    return np.log([r[0] for r in rows]), np.array([r[1] for r in rows])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_far_l2_half_found_on_a_real_h200_latency_curve(monkeypatch, seed):
    """The dense chase answered with a real H200's latency curve (near L2 143 ns to ~27 MiB, a far
    half at 230-240 ns from 37 to 51 MiB, memory 334 ns from ~85 MiB): the sweep measures inside
    the far half (half an octave wide) and the L2 reports it with its size. The sweep once
    bisected only the 80% and 20% crossings of that fall and never sampled the far half."""
    import dataclasses
    import math
    from detect_caches.detector.analyze import detect_levels
    from detect_caches.records import MeasurementLog
    from detect_caches.measure.session import SessionOptions, characterize, measure_latency
    from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile
    lx, ly = _real_h200_curve()
    model = SimulatedGPU.chase_ns

    def chase_ns(self, spec):
        if spec.sequential or spec.l2only or spec.partial or spec.slot_bytes != 64:
            return model(self, spec)
        return float(np.interp(math.log(spec.elements * spec.slot_bytes), lx, ly))
    monkeypatch.setattr(SimulatedGPU, "chase_ns", chase_ns)
    prof = dataclasses.replace(load_profile("h200"), seed=seed)
    dev = SimulatedGPU(prof)
    log = MeasurementLog(None)
    opts = SessionOptions()
    session = characterize(dev, log, opts)
    measure_latency(session, dev, log, opts, None)
    l2 = next(lv for lv in detect_levels(log.records, prof.facts).levels if lv.name == "L2")
    assert abs(l2.latency_ns / 143.1 - 1) <= 0.05
    near, far = l2.latency_steps
    assert abs(far["latency_ns"] / 235 - 1) <= 0.05
    # the far half ends between its last full hits (~43 MiB on this curve) and its fall's middle (72 MiB)
    assert 40 * MIB <= far["up_to_bytes"] <= 72 * MIB
    assert near["up_to_bytes"] < 37 * MIB
    chase = [r for r in log.records if r.sweep == "chase" and r.phase in ("coarse", "refine")]
    assert sum(36 * MIB <= r.working_set_bytes <= 52 * MIB for r in chase) >= 2   # inside the far half


# -- the transfer unit (measure.transfer): words read per second by stride, L1 skipped ------------

def _h200_strides(span: str) -> dict[int, float]:
    """The exploration on a real H200 (2026-11-30/check/sector.json in tests/data/h200-runs.tar.xz), as GB/s of
    words read, the figure the probe records."""
    rows = json.loads((H200 / "2026-11-30" / "check" / "sector.json").read_text())
    return {r["stride_bytes"]: r["gloads_per_s"] * 4 for r in rows if r["level"] == span and r["stride_bytes"] >= 8}


@pytest.mark.parametrize("span", ["L2 (.cg)", "L2 (.cg) 2 MiB"])
def test_transfer_unit_of_a_real_h200_l2_is_32_bytes(span):
    from detect_caches.detector.latency import transfer_unit
    assert transfer_unit(_h200_strides(span)) == 32


@pytest.mark.parametrize("rates,unit", [
    ({8: 800, 16: 400, 32: 200, 64: 100, 128: 100}, 64),       # halving up to 64 B, flat after
    ({8: 800, 16: 800, 32: 790, 64: 805, 128: 400}, None),     # never halving then flat
    ({8: 800, 16: 410}, None),                                # two strides say nothing
    ({8: 1000, 16: 520, 32: 510, 64: 300, 128: 290}, 16),
])
def test_transfer_unit_rule(rates, unit):
    from detect_caches.detector.latency import transfer_unit
    assert transfer_unit(rates) == unit


@pytest.mark.parametrize("sector,miss", [(32, 64), (64, None), (128, None)])
@pytest.mark.parametrize("seed", range(4))
def test_simulated_l2_sector_recovered_beside_what_a_miss_brings(sector, miss, seed):
    """The simulated H200 with its L2 handing out `sector` bytes (and a miss bringing `miss`
    from memory): the L2's sector is the transfer unit, whatever the chase sees; the stride probe
    adds no point to the shared curve."""
    from detect_caches.detector.analyze import detect_levels
    from detect_caches.detector.latency import attach_lines, probe_targets
    from detect_caches.records import MeasurementLog
    from detect_caches.measure.session import SessionOptions, characterize, measure_latency, probe_latency_lines
    from detect_caches.measure.sim.simulated import SimulatedGPU, load_profile
    import dataclasses
    prof = load_profile("h200")
    levels = [dataclasses.replace(lv, sector_bytes=sector, miss_bytes=miss) if lv.name == "L2" else lv
              for lv in prof.levels]
    prof = dataclasses.replace(prof, levels=levels, seed=seed)
    gpu = SimulatedGPU(prof)
    log = MeasurementLog(None)
    opts = SessionOptions(peak_budget=0)
    session = characterize(gpu, log, opts)
    measure_latency(session, gpu, log, opts)
    det = detect_levels(log.records, prof.facts)
    before = len(det.sweeps["shared"].curve.size_bytes)
    probe_latency_lines(session, probe_targets(det.levels), log, opts)
    probes = [r for r in log.records if r.sweep == "shared" and r.phase == "sector"]
    assert [r.stride_bytes for r in probes] == [8, 16, 32, 64, 128] and all(r.target == "L2" for r in probes)
    attach_lines(det.levels, log.records)
    l2 = next(lv for lv in det.levels if lv.name == "L2")
    assert l2.sector_bytes == sector
    assert any(f"one miss brings {miss} B" in n for n in l2.notes) == (miss is not None and miss != sector)
    again = detect_levels(log.records, prof.facts)
    assert len(again.sweeps["shared"].curve.size_bytes) == before


class _JitteryHost:
    """A timing device that takes 20 ns a hop; on each call listed in ``events`` the launch timings
    (CUDA events) read 40% under that, on each call listed in ``timer`` the in-kernel timer reads
    50% over it (calls counted from 1)."""

    def __init__(self, events=(), timer=()):
        from detect_caches.device import DeviceFacts
        self.facts, self.events, self.timer, self.calls = DeviceFacts(name="jittery", vendor="nvidia", compute_units=4), events, timer, []

    def time_chase(self, spec, warm_hops, hops, repeats):
        from detect_caches.measure.launch import ChaseTiming
        self.calls.append(repeats)
        hop_ns = 20.0 * (0.6 if len(self.calls) in self.events else 1.0)
        timer_ns = 20.0 * (1.5 if len(self.calls) in self.timer else 1.0)
        ms = np.array([[0.005 + (warm_hops + h) * hop_ns / 1e6] * repeats for h in hops])
        return ChaseTiming(tuple(hops), ms, hops[-1] * timer_ns * 1.98, hops[-1] * timer_ns)

    def sm_clock_mhz(self):
        return 1980.0


@pytest.mark.parametrize("events, timer, flags, slope_ns", [((), (), "", 20.0), ((1,), (), "rechecked", 20.0),
                                                            ((1, 2), (), "noisy;rechecked", 12.0),
                                                            ((), (1,), "rechecked", 20.0)])
def test_a_regression_the_host_disturbed_is_timed_again_before_the_point_is_noisy(events, timer, flags, slope_ns):
    """The device timer is the figure, the load-iteration regression its check: a disagreement is
    measured again (timer and launches, more repeats), and only a second one leaves the point out
    as noisy (an H100 host: 10 of 65 chase points 12-50% off the timer, the timer steady); a timer
    disturbed on the first try gives way to the second's reading."""
    from detect_caches.measure.latency import LatencyMeter
    host = _JitteryHost(events, timer)
    m = LatencyMeter(host).measure_chain(ChainSpec(512), phase="coarse")
    assert m.latency_ns == pytest.approx(20.0) and m.timing == "device"
    assert m.flags == flags
    assert len(host.calls) == (2 if flags else 1) and host.calls[0] == 2 and all(r > 2 for r in host.calls[1:])
    assert m.slope_ms * 1e6 == pytest.approx(slope_ns, rel=0.02)
