"""The pointer-chase kernel: one program, one dependent load after another.

Every element of the chain holds the address of the next one (an int64), so each hop is a
load whose result is the next load's address, with no index arithmetic in between (a chase of
indices pays a multiply-add per hop: a sizeable share of an L1 hit's latency). The program walks
the whole cycle once untimed (every line of the chain into the caches of its SM), then ``hops``
timed hops between reads of the SM clock (cycles) and a device timer (ns). Launch time against
``hops`` (CUDA events) gives the load-iteration regression's ns per hop.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _next(p, L2ONLY: tl.constexpr, ASM: tl.constexpr):
    """One hop. ASM 1 (NVIDIA): a single `ld.global[.cg].u64` in inline assembly. Triton's own
    64-bit load zeroes its result register before loading and may give it the address's
    register, loading from address 0; with one instruction the two may share a register
    safely. ASM 0: tl.load (the interpreter; AMD, whose load is one instruction)."""
    if ASM == 1:
        if L2ONLY:
            nxt = tl.inline_asm_elementwise("ld.global.cg.u64 $0, [$1];", "=l,l", [p.to(tl.int64)],
                                            dtype=tl.int64, is_pure=False, pack=1)
        else:
            nxt = tl.inline_asm_elementwise("ld.global.u64 $0, [$1];", "=l,l", [p.to(tl.int64)],
                                            dtype=tl.int64, is_pure=False, pack=1)
    elif L2ONLY:
        nxt = tl.load(p, cache_modifier=".cg")
    else:
        nxt = tl.load(p)
    return nxt.to(tl.pointer_type(tl.int64))


@triton.jit
def _cycles(after, CLOCK: tl.constexpr):
    """The SM/CU cycle counter, read after ``after`` is known. CLOCK 0: NVIDIA %clock64;
    1: AMD s_memtime; 2: none (the interpreter cannot run inline assembly)."""
    if CLOCK == 0:
        t = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,l", [after], dtype=tl.int64,
                                      is_pure=False, pack=1)
    elif CLOCK == 1:
        t = tl.inline_asm_elementwise("s_memtime $0\ns_waitcnt lgkmcnt(0)", "=s,s", [after],
                                      dtype=tl.int64, is_pure=False, pack=1)
    else:
        t = after * 0
    return t


@triton.jit
def _nanoseconds(after, CLOCK: tl.constexpr):
    """A device timer in ns (NVIDIA %globaltimer) or in 10 ns ticks (AMD s_memrealtime)."""
    if CLOCK == 0:
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,l", [after], dtype=tl.int64,
                                      is_pure=False, pack=1)
    elif CLOCK == 1:
        t = tl.inline_asm_elementwise("s_memrealtime $0\ns_waitcnt lgkmcnt(0)", "=s,s", [after],
                                      dtype=tl.int64, is_pure=False, pack=1)
    else:
        t = after * 0
    return t


@triton.jit(do_not_specialize=["start", "warm_hops", "hops"])
def chase_kernel(start, out_ptr, warm_hops, hops, L2ONLY: tl.constexpr, CLOCK: tl.constexpr,
                 ASM: tl.constexpr):
    """``start``: the address of the chain element to begin at. Walks ``warm_hops`` untimed hops,
    then ``hops`` timed ones; writes (cycles of the timed hops, timer ticks of the timed hops, the
    address reached) to out_ptr[0:3]. The warm-up is the same one-at-a-time walk: on an H200 a
    warm-up of 32 independent walks at once (one per lane) left the chain neither in the L1 nor
    in the L2's near half for the timed walk (its first pass missed everywhere)."""
    p = start.to(tl.pointer_type(tl.int64))
    for _ in range(warm_hops):
        p = _next(p, L2ONLY, ASM)
    n0 = _nanoseconds(p.to(tl.int64), CLOCK)
    t0 = _cycles(n0, CLOCK)
    for _ in range(hops):
        p = _next(p, L2ONLY, ASM)
    end = p.to(tl.int64)
    t1 = _cycles(end, CLOCK)
    n1 = _nanoseconds(t1, CLOCK)
    tl.store(out_ptr, t1 - t0)
    tl.store(out_ptr + 1, n1 - n0)
    tl.store(out_ptr + 2, end)
