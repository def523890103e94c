"""The seed's streaming-load kernel, with a choice of load flavour and layout, and a variant
timed inside the kernel.

Each program ``pid`` streams row ``pid % row_count`` of ``stream_elems`` float32 values in
BLOCK_SIZE chunks, ``load_iters`` times, and stores its BLOCK_SIZE partial sums to ``y[pid, :]``
so that no load can be eliminated. A row is whole chunks (unmasked loads) plus one masked tail
chunk; ``stream_elems`` is always a multiple of 256 (1 KiB), so the compiler sees the same
16-element divisibility at every size of a sweep and emits the same 16-byte vector loads:
neighbouring sizes run the same machine code.

Layouts: rows lie one after another (INTERLEAVE=False), or chunk ``c`` of row ``r`` lies at
chunk slot ``c * row_count + r`` (INTERLEAVE=True), so that at any moment all programs read
neighbouring addresses, as a grid-stride loop does; the bytes each program reads are the same.
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


@triton.jit
def _row_start(x_ptr, stream_elems, row_count, BLOCK_SIZE: tl.constexpr,
               ROW_BY_SM: tl.constexpr, INTERLEAVE: tl.constexpr):
    if ROW_BY_SM:
        # every program on one SM streams that SM's row: the per-SM working set is exactly one
        # row however the scheduler spreads programs, and several programs per SM keep enough
        # loads in flight to reach the L1 ceiling (NVIDIA only; the interpreter cannot run asm)
        smid = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                         is_pure=True, pack=1)
        row_index = smid % row_count
    else:
        row_index = tl.program_id(0) % row_count
    if INTERLEAVE:
        row = x_ptr + row_index.to(tl.int64) * BLOCK_SIZE
    else:
        row = x_ptr + row_index.to(tl.int64) * stream_elems
    return row


@triton.jit
def _stream_pass(row, acc, stream_elems, row_count, BLOCK_SIZE: tl.constexpr, LOAD: tl.constexpr,
                 INTERLEAVE: tl.constexpr):
    """One pass over a row: whole chunks, then the masked tail."""
    offs = tl.arange(0, BLOCK_SIZE)
    full_chunks = stream_elems // BLOCK_SIZE
    tail_elems = stream_elems - full_chunks * BLOCK_SIZE
    if INTERLEAVE:
        stride = row_count.to(tl.int64) * BLOCK_SIZE
        for chunk in range(0, full_chunks):
            acc += _load(row + chunk * stride + offs, None, LOAD, False)
        if tail_elems > 0:
            acc += _load(row + full_chunks * stride + offs, offs < tail_elems, LOAD, True)
    else:
        full_elems = full_chunks * BLOCK_SIZE
        for start in range(0, full_elems, BLOCK_SIZE):
            acc += _load(row + start + offs, None, LOAD, False)
        if tail_elems > 0:
            tail_offs = full_elems + offs
            acc += _load(row + tail_offs, tail_offs < stream_elems, LOAD, True)
    return acc


@triton.jit(do_not_specialize=["load_iters"])
def stream_load_kernel(x_ptr, y_ptr, stream_elems, load_iters, row_count,
                       BLOCK_SIZE: tl.constexpr, LOAD: tl.constexpr, ROW_BY_SM: tl.constexpr = False,
                       INTERLEAVE: tl.constexpr = False):
    pid = tl.program_id(0)
    row = _row_start(x_ptr, stream_elems, row_count, BLOCK_SIZE, ROW_BY_SM, INTERLEAVE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for _ in range(load_iters):
        acc = _stream_pass(row, acc, stream_elems, row_count, BLOCK_SIZE, LOAD, INTERLEAVE)
    tl.store(y_ptr + pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE), acc)


@triton.jit
def _device_clock(after, CLOCK: tl.constexpr):
    """A device clock read that waits for ``after`` (a value reduced over the whole program).
    CLOCK 0: NVIDIA %globaltimer (ns); 1: AMD s_memrealtime (100 MHz counter)."""
    if CLOCK == 0:
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [after], dtype=tl.int64,
                                      is_pure=False, pack=1)
    else:
        t = tl.inline_asm_elementwise("s_memrealtime $0\ns_waitcnt lgkmcnt(0)", "=s,v", [after],
                                      dtype=tl.int64, is_pure=False, pack=1)
    return t


@triton.jit
def _grid_barrier(sync_ptr, after, n_programs, MAX_SPINS: tl.constexpr):
    """Wait until all ``n_programs`` have arrived (safe only when they all run in one wave, which
    the host checks; the spin is bounded so a wrong check cannot hang the GPU). ``after`` is
    the program's reduced warm-up sum (never negative: the buffer holds [0, 1) values), which
    keeps the arrival behind the warm-up loads. Returns the spins, MAX_SPINS if it gave up."""
    tl.atomic_add(sync_ptr, (after >= 0.0).to(tl.int32))
    arrived = tl.atomic_add(sync_ptr, 0)
    spins = 0
    while (arrived < n_programs) & (spins < MAX_SPINS):
        arrived = tl.atomic_add(sync_ptr, 0)
        spins += 1
    return spins


@triton.jit(do_not_specialize=["warm_iters", "load_iters"])
def stream_load_timed_kernel(x_ptr, y_ptr, t_ptr, sync_ptr, stream_elems, warm_iters, load_iters, row_count,
                             BLOCK_SIZE: tl.constexpr, LOAD: tl.constexpr, CLOCK: tl.constexpr,
                             ROW_BY_SM: tl.constexpr = False, INTERLEAVE: tl.constexpr = False,
                             MAX_SPINS: tl.constexpr = 1 << 20):
    """The seed article's method: untimed warm-up passes, then a clock read, the measured passes
    and a second clock read; each program writes (start, end, spins) to t_ptr[3 pid:3 pid + 3].
    A grid barrier after the warm-up starts every program's timed phase together, so the
    longest program spans the phase (the article assumes this of one wave). The reads wait for a
    sum over the program's accumulator, so every load before them has returned."""
    pid = tl.program_id(0)
    row = _row_start(x_ptr, stream_elems, row_count, BLOCK_SIZE, ROW_BY_SM, INTERLEAVE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for _ in range(warm_iters):
        acc = _stream_pass(row, acc, stream_elems, row_count, BLOCK_SIZE, LOAD, INTERLEAVE)
    warm_sum = tl.sum(acc, axis=0)
    spins = _grid_barrier(sync_ptr, warm_sum, tl.num_programs(0), MAX_SPINS)
    start = _device_clock(warm_sum + spins.to(tl.float32) * 0.0, CLOCK)
    for _ in range(load_iters):
        acc = _stream_pass(row, acc, stream_elems, row_count, BLOCK_SIZE, LOAD, INTERLEAVE)
    end = _device_clock(tl.sum(acc, axis=0), CLOCK)
    tl.store(y_ptr + pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE), acc)
    tl.store(t_ptr + 3 * pid, start)
    tl.store(t_ptr + 3 * pid + 1, end)
    tl.store(t_ptr + 3 * pid + 2, spins.to(tl.int64))


@triton.jit(do_not_specialize=["slot_mask", "iters", "stride"])
def strided_load_kernel(x_ptr, y_ptr, slot_mask, iters, stride, BLOCK: tl.constexpr, LOAD: tl.constexpr):
    """The transfer-unit probe (measure.transfer). Program ``pid`` reads, at iteration ``it``,
    the words of slots ((pid + it x programs) x BLOCK + lane) & slot_mask (a power-of-two set),
    each ``stride`` elements apart: all programs together sweep the set in order, every lane its
    own word. 32-bit index arithmetic and a mask, not a 64-bit modulo: the loop must cost less
    than the loads at every stride (a 64-bit modulo held an H200 to ~530 G loads/s:
    BENCHMARKS.md, 2026-11-30, fourth session). The sums are stored so that no load can be
    dropped; the arguments are not specialized: one binary serves every stride and size."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    slot = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for it in range(iters):
        acc += _load(x_ptr + (slot & slot_mask) * stride, None, LOAD, False)
        slot = (slot + step) & slot_mask
    tl.store(y_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)
