"""Many GPUs: every listed GPU of a node in its own process (`--gpu all`, `--gpu 0,2,5`), and a
fleet launched by torchrun or Slurm's srun, gathered with torch.distributed (gloo: the gather
moves a few kilobytes of JSON, and gloo needs no GPU)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from measure.errors import DetectCachesError, InputError


def node_targets(args) -> list[tuple[int | None, str | None]]:
    """(gpu index, simulated profile) per device to measure."""
    if args.simulate is not None:
        profiles = [p.strip() for p in args.simulate.split(",") if p.strip()]
        if not profiles:
            raise InputError("--simulate needs a profile name or file")
        if len(profiles) == 1:
            return [(None, profiles[0])]
        return [(i, p) for i, p in enumerate(profiles)]
    text = str(args.gpu).strip().lower()
    if text == "all":
        from measure.gpu import gpu_count
        n = gpu_count()
        if n == 0:
            raise InputError("--gpu all: no GPU is visible; use --simulate h200 or `detect-caches analyze`")
        return [(i, None) for i in range(n)]
    try:
        indices = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--gpu takes an index, a comma list of indices or `all`, got {args.gpu!r}") from None
    if not indices or any(i < 0 for i in indices) or len(set(indices)) < len(indices):
        raise InputError(f"--gpu needs distinct indices >= 0, got {args.gpu!r}")
    return [(i, None) for i in indices]


def _child_argv(args, gpu: int | None, profile: str | None, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "detect_caches", "--quiet", "--out", str(out), "--budget", str(args.budget),
            "--grid-multiplier", str(args.grid_multiplier), "--sweeps", args.sweeps, "--timing", args.timing]
    if args.no_peaks:
        argv.append("--no-peaks")
    if args.max_working_set:
        argv += ["--max-working-set", str(args.max_working_set)]
    if profile is not None:
        return argv + ["--simulate", profile, "--sim-index", str(gpu or 0)]
    return argv + ["--gpu", str(gpu)]


def run_node(args, targets: list[tuple[int | None, str | None]], finish) -> int:
    """One process per GPU, all at once; one folder per GPU plus the node summary."""
    root = args.out or Path("detect-caches-results") / f"node-{socket.gethostname()}-{time.strftime('%Y%m%d-%H%M%S')}"
    if root.exists() and any(root.iterdir()):
        raise InputError(f"{root} already exists; choose another --out (results are never overwritten)")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write to {root}: {exc.strerror or exc}") from None
    procs = []
    for gpu, profile in targets:
        sub = root / f"gpu{gpu}"
        log = open(root / f"gpu{gpu}.log", "w")
        env = dict(os.environ)
        procs.append((gpu, sub, log, subprocess.Popen(_child_argv(args, gpu, profile, sub), stdout=log,
                                                      stderr=subprocess.STDOUT, env=env)))
    results, failed = [], []
    try:
        for gpu, sub, log, proc in procs:
            rc = proc.wait()
            log.close()
            result = _read(sub / "result.json")
            if result is None:
                failed.append(f"GPU {gpu}: exit {rc}, see {root / f'gpu{gpu}.log'}")
            else:
                results.append(result)
    except KeyboardInterrupt:
        for *_, proc in procs:
            proc.terminate()
        raise InputError(f"interrupted; each GPU's measurements so far are in {root}/gpu*/measurements.csv") from None
    return finish(results, args, root, failed, same_time=True)


def _read(path: Path) -> dict | None:
    from reports.result_json import read_result
    try:
        return read_result(path)
    except DetectCachesError:
        return None


# -- torchrun / srun ------------------------------------------------------------------------

def distributed_rank() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when launched by torchrun or srun, else None."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        return rank, world, int(env.get("LOCAL_RANK", rank))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "MASTER_ADDR" in env:
        rank, world = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
        return rank, world, int(env.get("SLURM_LOCALID", rank))
    return None


def run_rank(args, rank_info: tuple[int, int, int], characterize_one, open_device, finish) -> int:
    """Each rank measures its local GPU (or simulated profile) into its own folder; rank 0 gathers
    every result and writes the fleet report under --out."""
    import torch.distributed as dist
    rank, world, local = rank_info
    if args.simulate is not None:
        profiles = [p.strip() for p in args.simulate.split(",") if p.strip()]
        gpu, profile = rank, profiles[rank % len(profiles)]
    elif args.gpu is None:
        gpu, profile = local, None
    elif str(args.gpu).strip().isdigit():
        gpu, profile = int(args.gpu), None
    else:
        raise InputError(f"under torchrun or srun each rank measures one GPU (its LOCAL_RANK by default); "
                         f"--gpu {args.gpu!r} is not a single index")
    root = args.out or Path("detect-caches-results") / f"fleet-{time.strftime('%Y%m%d')}"
    sub = root / f"{socket.gethostname()}-rank{rank}"
    env = os.environ
    if "MASTER_ADDR" in env and "RANK" not in env:   # srun: torch's env:// wants these names
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local))
        env.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo")
    result, error = None, ""
    try:
        if sub.exists() and any(sub.iterdir()):
            raise InputError(f"{sub} already exists; choose another --out (results are never overwritten)")
        sub.mkdir(parents=True, exist_ok=True)
        device = open_device(args, gpu, profile)
        result = characterize_one(args, device, sub)
    except DetectCachesError as exc:
        error = f"rank {rank} ({socket.gethostname()}): {exc}"
        print(f"detect-caches: error: {error}", file=sys.stderr)
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(json.dumps({"result": result, "error": error}), gathered, dst=0)
    codes = [0 if result is not None else 2]
    if rank == 0:
        items = [json.loads(g) for g in gathered]
        try:
            codes[0] = finish([i["result"] for i in items if i["result"]], args, root,
                              [i["error"] for i in items if i["error"]], same_time=True)
        except DetectCachesError as exc:
            print(f"detect-caches: error: {exc}", file=sys.stderr)
            codes[0] = 2
    dist.broadcast_object_list(codes, src=0)   # every rank exits with the fleet's verdict
    dist.destroy_process_group()
    return codes[0]
