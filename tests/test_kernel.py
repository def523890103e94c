"""The kernel on the CPU: results in Triton's interpreter, and the loads it compiles to for
sm_90 (H100/H200) and gfx942 (MI300X), cross-compiled without a GPU."""
import numpy as np
import pytest
from cross import run_cross


@pytest.mark.parametrize("flavour", [0, 1, 2, 3])
@pytest.mark.parametrize("block,elems", [(64, 256), (256, 256 * 3), (1024, 256 * 5), (2048, 256 * 8), (2048, 256 * 9),
                                         (8192, 256 * 41)])
def test_interpreter_sums_match_numpy(flavour, block, elems):
    import torch
    from detect_caches.measure.gpu.kernel import stream_load_kernel
    programs, iters = 3, 2
    rng = np.random.default_rng(block + elems)
    x = torch.tensor(rng.random(programs * elems, dtype=np.float32))
    y = torch.full((programs * block,), float("nan"))
    stream_load_kernel[(programs,)](x, y, elems, iters, programs, BLOCK_SIZE=block, LOAD=flavour)
    pad = (-elems) % block
    xr = np.pad(x.numpy().reshape(programs, elems).astype(np.float64), ((0, 0), (0, pad)))
    expect = iters * xr.reshape(programs, -1, block).sum(axis=1)
    np.testing.assert_allclose(y.numpy().reshape(programs, block), expect, rtol=1e-5)


CROSS = r"""
import json, re, triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from detect_caches.measure.gpu.kernel import stream_load_kernel, stream_load_timed_kernel, strided_load_kernel
from detect_caches.measure.kernel_meta import DEVICE_CLOCKS, flavour_code
sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "stream_elems": "i32", "load_iters": "i32", "row_count": "i32",
       "BLOCK_SIZE": "constexpr", "LOAD": "constexpr", "ROW_BY_SM": "constexpr", "INTERLEAVE": "constexpr"}
tsig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "t_ptr": "*i64", "sync_ptr": "*i32", "stream_elems": "i32", "warm_iters": "i32",
        "load_iters": "i32", "row_count": "i32", "BLOCK_SIZE": "constexpr", "LOAD": "constexpr",
        "CLOCK": "constexpr", "ROW_BY_SM": "constexpr", "INTERLEAVE": "constexpr", "MAX_SPINS": "constexpr"}
ssig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "slot_mask": "i32", "iters": "i32", "stride": "i32",
        "BLOCK": "constexpr", "LOAD": "constexpr"}
LOADS = r"\bld\.(global|volatile)|buffer_load|global_load"
MARKS = LOADS + r"|globaltimer|s_memrealtime|bar\.sync|s_barrier|atom\.|global_atomic|buffer_atomic"
div = {(i,): [["tt.divisibility", 16]] for i in range(5)}
out = {}
for name, tgt, vendor in (("sm_90", GPUTarget("cuda", 90, 32), "nvidia"), ("gfx942", GPUTarget("hip", "gfx942", 64), "amd")):
    def build(fn, signature, constexprs, pattern, attrs=div):
        k = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                           target=tgt, options={"num_warps": 4})
        asm = k.asm.get("ptx") or k.asm.get("amdgcn")
        return [l.strip() for l in asm.splitlines() if re.search(pattern, l)]
    for load in (0, 1, 2, 3):
        for inter in (False, True):
            out[f"{name}/{load}/{int(inter)}"] = build(
                stream_load_kernel, sig, {"BLOCK_SIZE": 1024, "LOAD": load, "ROW_BY_SM": False, "INTERLEAVE": inter}, LOADS)
    out[f"{name}/timed"] = build(stream_load_timed_kernel, tsig, {
        "BLOCK_SIZE": 1024, "LOAD": 2 if vendor == "nvidia" else 3, "CLOCK": DEVICE_CLOCKS[vendor]["code"],
        "ROW_BY_SM": False, "INTERLEAVE": False, "MAX_SPINS": 1 << 20}, MARKS)
    out[f"{name}/strided"] = build(strided_load_kernel, ssig, {"BLOCK": 256, "LOAD": flavour_code("l2only", vendor)},
                                   LOADS, attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled_loads():
    return run_cross(CROSS)


@pytest.mark.parametrize("load,modifier", [(0, "ld.volatile.global.v4"), (1, "ld.global.v4"),
                                           (2, "ld.global.cg.v4"), (3, "ld.global.cv.v4")])
@pytest.mark.parametrize("inter", [0, 1])
def test_sm90_loads(compiled_loads, load, modifier, inter):
    loads = compiled_loads[f"sm_90/{load}/{inter}"]
    # 16-byte loads, in the whole-chunk loop and in the masked tail, all with the flavour's modifier
    assert len(loads) >= 2
    assert all(modifier + ".b32" in l for l in loads), loads


@pytest.mark.parametrize("load,bits", [(1, set()), (2, {"nt"}), (3, {"sc0", "sc1"})])
@pytest.mark.parametrize("inter", [0, 1])
def test_gfx942_loads(compiled_loads, load, bits, inter):
    loads = compiled_loads[f"gfx942/{load}/{inter}"]
    assert len(loads) >= 2
    assert all("dwordx4" in l for l in loads), loads            # 16 bytes wide
    for l in loads:
        assert bits <= set(l.replace(",", " ").split()), l     # the flavour's cache bits


def test_gfx942_l2only_bypasses_l1(compiled_loads):
    """l2only on AMD is `.cv`: system scope (sc0 sc1), which misses the vL1D."""
    from detect_caches.measure.kernel_meta import flavour_code
    loads = compiled_loads[f"gfx942/{flavour_code('l2only', 'amd')}/0"]
    assert all("sc0" in l and "sc1" in l for l in loads)


@pytest.mark.parametrize("target,clock,barrier,atomic,flavour", [
    ("sm_90", "globaltimer", "bar.sync", "atom.global", "ld.global.cg.v4"),
    ("gfx942", "s_memrealtime", "s_barrier", "global_atomic", "sc1")])
def test_timed_kernel_reads_the_clock_around_the_measured_loads(compiled_loads, target, clock, barrier,
                                                                atomic, flavour):
    """Warm-up loads, the grid barrier's atomics, a clock read, the timed phase's loads, a
    barrier (the reduction over the program) and the last clock read, with no load after it."""
    lines = compiled_loads[f"{target}/timed"]
    reads = [i for i, l in enumerate(lines) if clock in l]
    loads = [i for i, l in enumerate(lines) if flavour in l]
    atomics = [i for i, l in enumerate(lines) if atomic in l]
    assert len(reads) >= 2, lines
    first, last = reads[0], reads[-1]
    warm = [i for i in loads if i < first]
    timed = [i for i in loads if first < i < last]
    assert warm and timed and not [i for i in loads if i > last], lines
    assert any(max(warm) < a < first for a in atomics), lines     # the grid barrier
    assert any(barrier in l for l in lines[max(timed):last]), lines


@pytest.mark.parametrize("block,elems,rows,programs", [(256, 256 * 3, 3, 3), (1024, 256 * 5, 2, 4),
                                                       (2048, 256 * 9, 3, 6), (64, 256, 1, 2)])
def test_interpreter_interleaved_and_shared_rows(block, elems, rows, programs):
    """INTERLEAVE: chunk c of row r sits at slot c * rows + r; programs share rows (pid % rows)."""
    import torch
    from detect_caches.measure.gpu.kernel import stream_load_kernel
    from detect_caches.measure.launch import LaunchConfig
    chunks = -(-elems // block)
    cfg = LaunchConfig("shared", programs, block, 4, 1, "cached", interleave=True, row_share=programs // rows)
    assert cfg.buffer_elems(1, elems) == rows * chunks * block
    rng = np.random.default_rng(elems)
    x = torch.tensor(rng.random(cfg.buffer_elems(1, elems), dtype=np.float32))
    y = torch.full((programs * block,), float("nan"))
    stream_load_kernel[(programs,)](x, y, elems, 2, rows, BLOCK_SIZE=block, LOAD=1, INTERLEAVE=True)
    slots = x.numpy().reshape(chunks, rows, block).astype(np.float64)
    tail = elems - (chunks - 1) * block
    slots[chunks - 1, :, tail:] = 0.0        # the masked tail reads only its own elements
    expect = 2 * slots.sum(axis=0)
    np.testing.assert_allclose(y.numpy().reshape(programs, block), expect[np.arange(programs) % rows], rtol=1e-5)


def test_strided_kernel_loads_one_word_per_lane_past_the_l1(compiled_loads):
    """The transfer-unit probe (measure.transfer): 4-byte loads (a lane's word, never a vector
    that would read its neighbours' too) that skip the L1: `.cg` on sm_90, sc0 sc1 on gfx942."""
    sm90, gfx = compiled_loads["sm_90/strided"], compiled_loads["gfx942/strided"]
    assert sm90 and all("ld.global.cg.b32" in l and ".v2" not in l and ".v4" not in l for l in sm90), sm90
    assert gfx and all("global_load_dword " in l + " " and "sc0" in l and "sc1" in l for l in gfx), gfx


@pytest.mark.parametrize("n_slots,stride,iters,programs", [(1024, 2, 3, 2), (256, 8, 5, 3), (64, 32, 4, 1),
                                                           (512, 1, 9, 5)])
def test_interpreter_strided_sums(n_slots, stride, iters, programs):
    """Program p, iteration i, lane l reads word ((p + i x programs) x BLOCK + l) mod n_slots
    (a power of two), stride elements apart: every word of the set in turn, in order."""
    import torch
    from detect_caches.measure.gpu.kernel import strided_load_kernel
    block = 64
    rng = np.random.default_rng(n_slots)
    x = torch.tensor(rng.random(n_slots * stride, dtype=np.float32))
    y = torch.full((programs * block,), float("nan"))
    strided_load_kernel[(programs,)](x, y, n_slots - 1, iters, stride, BLOCK=block, LOAD=1)
    words = x.numpy().astype(np.float64)[::stride]
    expect = np.zeros((programs, block))
    for p in range(programs):
        for i in range(iters):
            expect[p] += words[((p + i * programs) * block + np.arange(block)) % n_slots]
    np.testing.assert_allclose(y.numpy().reshape(programs, block), expect, rtol=1e-5)
