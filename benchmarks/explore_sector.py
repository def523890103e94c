"""Transfer granularity of a cache by bandwidth: loads per second against the stride between the
4-byte words that neighbouring lanes read, over a working set the level holds.

Each load moves whole transfer units: a lane's 4 bytes cost min(stride, unit) bytes of the
link, so loads per second halve with every doubling of the stride until the stride reaches the
unit, and stay flat after it. With `.cg` loads (NVIDIA: served by the L2, the L1 bypassed) over a
set the L2 holds, the knee is the L2-to-SM transfer unit, the L2's sector; with cached loads over
a set each SM's L1 holds, the L1's. An exploration, not part of the tool:

    python3 benchmarks/explore_sector.py --gpu 0 > sector.log
"""
from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl


@triton.jit
def strided_sum(x_ptr, out_ptr, n_slots, iters, STRIDE: tl.constexpr, BLOCK: tl.constexpr,
                CG: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    lane = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for it in range(iters):
        slot = ((pid + it * nprog) * BLOCK + lane) % n_slots
        if CG:
            acc += tl.load(x_ptr + slot * STRIDE, cache_modifier=".cg")
        else:
            acc += tl.load(x_ptr + slot * STRIDE)
    tl.store(out_ptr + pid * BLOCK + lane, acc)


def loads_per_s(x, out, n_slots, stride, programs, block, cg, warps):
    def run(iters):
        strided_sum[(programs,)](x, out, n_slots, iters, STRIDE=stride, BLOCK=block, CG=cg, num_warps=warps)

    times = {}
    for iters in (256, 1024):
        run(iters)
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run(iters)
            b.record()
            b.synchronize()
            samples.append(a.elapsed_time(b))
        times[iters] = sorted(samples)[2]
    ms_per_iter = (times[1024] - times[256]) / 768
    return programs * block / (ms_per_iter * 1e-3)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.cuda.set_device(args.gpu)
    sms = torch.cuda.get_device_properties(args.gpu).multi_processor_count
    rows = []
    # (name, span of the set in bytes, programs, cg): the L2 with L1 bypassed over 8 MiB (the
    # near half of an H200's L2 holds it), the L1 over 64 KiB per SM with one program per SM
    for name, span, programs, cg in (("L2 (.cg)", 8 << 20, 8 * sms, True),
                                     ("L2 (.cg) 2 MiB", 2 << 20, 8 * sms, True),
                                     ("L1 (cached)", 64 << 10, sms, False)):
        prev = None
        for stride_bytes in (4, 8, 16, 32, 64, 128, 256):
            stride = stride_bytes // 4
            n_slots = span // stride_bytes
            x = torch.ones(n_slots * stride, device="cuda", dtype=torch.float32)
            out = torch.empty(programs * 256, device="cuda", dtype=torch.float32)
            rate = loads_per_s(x, out, n_slots, stride, programs, 256, cg, 8)
            ratio = prev / rate if prev else float("nan")
            prev = rate
            rows.append({"level": name, "stride_bytes": stride_bytes, "gloads_per_s": rate / 1e9,
                         "moved_gbs_if_32": rate * min(stride_bytes, 32) / 1e9,
                         "ratio_to_previous": ratio})
            print(f"{name:16s} stride {stride_bytes:4d} B: {rate / 1e9:9.1f} G loads/s, halving ratio "
                  f"{ratio:5.2f}, bytes moved if 32-B units {rate * min(stride_bytes, 32) / 1e9:8.0f} GB/s",
                  flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
