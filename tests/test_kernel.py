"""The kernel on the CPU: results in Triton's interpreter, and the loads it compiles to for
sm_90 (H100/H200) and gfx942 (MI300X), cross-compiled without a GPU."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("flavour", [0, 1, 2, 3])
@pytest.mark.parametrize("block,elems", [(64, 256), (256, 256 * 3), (1024, 256 * 5), (2048, 256 * 8), (2048, 256 * 9)])
def test_interpreter_sums_match_numpy(flavour, block, elems):
    import torch
    from measure.kernel import stream_load_kernel
    programs, iters = 3, 2
    rng = np.random.default_rng(block + elems)
    x = torch.tensor(rng.random(programs * elems, dtype=np.float32))
    y = torch.full((programs * block,), float("nan"))
    stream_load_kernel[(programs,)](x, y, elems, iters, programs, BLOCK_SIZE=block, LOAD=flavour)
    pad = (-elems) % block
    xr = np.pad(x.numpy().reshape(programs, elems).astype(np.float64), ((0, 0), (0, pad)))
    expect = iters * xr.reshape(programs, -1, block).sum(axis=1)
    np.testing.assert_allclose(y.numpy().reshape(programs, block), expect, rtol=1e-5)


CROSS = r'''
import json, re, triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from measure.kernel import stream_load_kernel
sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "stream_elems": "i32", "load_iters": "i32", "row_count": "i32",
       "BLOCK_SIZE": "constexpr", "LOAD": "constexpr", "ROW_BY_SM": "constexpr"}
out = {}
for name, tgt in (("sm_90", GPUTarget("cuda", 90, 32)), ("gfx942", GPUTarget("hip", "gfx942", 64))):
    for load in (0, 1, 2, 3):
        src = ASTSource(fn=stream_load_kernel, signature=sig,
                        constexprs={"BLOCK_SIZE": 1024, "LOAD": load, "ROW_BY_SM": False},
                        attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                               (2,): [["tt.divisibility", 16]]})
        k = triton.compile(src, target=tgt, options={"num_warps": 4})
        asm = k.asm.get("ptx") or k.asm.get("amdgcn")
        out[f"{name}/{load}"] = [l.strip() for l in asm.splitlines()
                                 if re.search(r"\bld\.(global|volatile)|buffer_load|global_load", l)]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def compiled_loads():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", CROSS], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("load,modifier", [(0, "ld.volatile.global.v4"), (1, "ld.global.v4"),
                                           (2, "ld.global.cg.v4"), (3, "ld.global.cv.v4")])
def test_sm90_loads(compiled_loads, load, modifier):
    loads = compiled_loads[f"sm_90/{load}"]
    # 16-byte loads, in the whole-chunk loop and in the masked tail, all with the flavour's modifier
    assert len(loads) >= 2
    assert all(modifier + ".b32" in l for l in loads), loads


@pytest.mark.parametrize("load,bits", [(1, set()), (2, {"nt"}), (3, {"sc0", "sc1"})])
def test_gfx942_loads(compiled_loads, load, bits):
    loads = compiled_loads[f"gfx942/{load}"]
    assert len(loads) >= 2
    assert all("dwordx4" in l for l in loads), loads            # 16 bytes wide
    for l in loads:
        assert bits <= set(l.replace(",", " ").split()), l     # the flavour's cache bits


def test_gfx942_l2only_bypasses_l1(compiled_loads):
    """l2only on AMD is `.cv`: system scope (sc0 sc1), which misses the vL1D."""
    from measure.kernel_meta import flavour_code
    loads = compiled_loads[f"gfx942/{flavour_code('l2only', 'amd')}"]
    assert all("sc0" in l and "sc1" in l for l in loads)
