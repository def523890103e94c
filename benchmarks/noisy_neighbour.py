"""A second GPU workload for reliability trials: bf16 matrix multiplies (and a memory copy) in a
loop for --seconds, so that detect-caches shares the GPU with another process.
    python3 benchmarks/noisy_neighbour.py --gpu 0 --seconds 60 &"""
from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--copy-mib", type=int, default=1024, help="bytes copied per step, MiB (HBM traffic)")
    args = ap.parse_args()
    dev = f"cuda:{args.gpu}"
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    src = torch.empty(args.copy_mib << 18, device=dev)
    dst = torch.empty_like(src)
    end = time.time() + args.seconds
    steps = 0
    while time.time() < end:
        for _ in range(4):
            a = (a @ a).clamp_(-1, 1)
        dst.copy_(src)
        torch.cuda.synchronize(dev)
        steps += 1
    print(f"noisy neighbour: {steps} steps in {args.seconds:.0f} s")


if __name__ == "__main__":
    main()
