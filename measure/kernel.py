"""The seed's streaming-load kernel, with a choice of load flavour.

Each program ``pid`` streams its own row ``x[pid, :]`` of ``stream_elems`` float32 values in
BLOCK_SIZE chunks, ``load_iters`` times, and stores its BLOCK_SIZE partial sums to ``y[pid, :]``
so that no load can be eliminated. The row is split into whole chunks (unmasked loads) and one
masked tail chunk; ``stream_elems`` is always a multiple of 256 (1 KiB), so the compiler sees
the same 16-element divisibility at every size of a sweep and emits the same 16-byte vector
loads: neighbouring sizes run the same machine code.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _load(ptrs, mask, LOAD: tl.constexpr, MASKED: tl.constexpr):
    # LOAD codes: measure.kernel_meta.LOAD_CODE (0 volatile, 1 cached, 2 .cg, 3 .cv)
    if MASKED:
        if LOAD == 0:
            val = tl.load(ptrs, mask=mask, other=0.0, volatile=True)
        elif LOAD == 2:
            val = tl.load(ptrs, mask=mask, other=0.0, cache_modifier=".cg")
        elif LOAD == 3:
            val = tl.load(ptrs, mask=mask, other=0.0, cache_modifier=".cv")
        else:
            val = tl.load(ptrs, mask=mask, other=0.0)
    else:
        if LOAD == 0:
            val = tl.load(ptrs, volatile=True)
        elif LOAD == 2:
            val = tl.load(ptrs, cache_modifier=".cg")
        elif LOAD == 3:
            val = tl.load(ptrs, cache_modifier=".cv")
        else:
            val = tl.load(ptrs)
    return val


@triton.jit(do_not_specialize=["load_iters"])
def stream_load_kernel(x_ptr, y_ptr, stream_elems, load_iters, row_count,
                       BLOCK_SIZE: tl.constexpr, LOAD: tl.constexpr, ROW_BY_SM: tl.constexpr = False):
    pid = tl.program_id(0)
    if ROW_BY_SM:
        # every program on one SM streams that SM's row: the per-SM working set is exactly one
        # row however the scheduler spreads programs, and several programs per SM keep enough
        # loads in flight to reach the L1 ceiling (NVIDIA only; the interpreter cannot run asm)
        smid = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                         is_pure=True, pack=1)
        row_index = smid % row_count
    else:
        row_index = pid
    row = x_ptr + row_index.to(tl.int64) * stream_elems
    offs = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    full_elems = (stream_elems // BLOCK_SIZE) * BLOCK_SIZE
    for _ in range(load_iters):
        for start in range(0, full_elems, BLOCK_SIZE):
            acc += _load(row + start + offs, None, LOAD, False)
        if full_elems < stream_elems:
            tail_offs = full_elems + offs
            acc += _load(row + tail_offs, tail_offs < stream_elems, LOAD, True)
    tl.store(y_ptr + pid * BLOCK_SIZE + offs, acc)
