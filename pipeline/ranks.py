"""A fleet launched by torchrun or Slurm's srun: each rank measures its local GPU into its own
folder, rank 0 gathers the results (gloo: a few kilobytes of JSON; gloo needs no GPU) and writes
the fleet report. Rank 0 claims the fleet's folder and loads the baseline once the group has
formed and before anyone measures; if it cannot, every rank stops with one line. A group that
cannot form says so in one line within DETECT_CACHES_RENDEZVOUS_SECONDS (the library's own
complaints go to a file, not the terminal)."""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from detect_caches.errors import DetectCachesError, InputError
from detect_caches.validate import env_int

RENDEZVOUS_SECONDS = 120


def _target(args, rank: int, local: int) -> tuple[int, str | None]:
    if args.simulate is not None:
        profiles = [p.strip() for p in args.simulate.split(",") if p.strip()]
        return rank, profiles[rank % len(profiles)]
    if args.gpu is None:
        return local, None
    if str(args.gpu).strip().isdigit():
        return int(args.gpu), None
    raise InputError(f"under torchrun or srun each rank measures one GPU (its LOCAL_RANK by default); "
                     f"--gpu {args.gpu!r} is not a single index")


def _form_group(dist, rank: int, world: int, wait: int) -> None:
    """init_process_group with the library's stderr chatter (tens of lines when peers never
    come) kept in a file; one line of ours instead."""
    log = tempfile.TemporaryFile()
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(log.fileno(), 2)
        try:
            dist.init_process_group("gloo", timeout=timedelta(seconds=wait))
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
    except Exception as exc:
        raise DetectCachesError(f"rank {rank} of {world} could not form the process group within {wait} s "
                                f"({type(exc).__name__}); under Slurm start it with srun, or check MASTER_ADDR "
                                f"and MASTER_PORT") from None
    finally:
        os.close(saved)
        log.close()


def _open_fleet(args, root: Path):
    """Rank 0, before anyone measures: the fleet's folder claimed, the baseline loaded."""
    from detect_caches.pipeline.outputs import claim_out_dir
    from detect_caches.reports.baseline import BaselineSource
    source = BaselineSource.load(args.baseline)
    claim_out_dir(root)
    return source


def run_rank(args, rank_info: tuple[int, int, int], measure_one, finish) -> int:
    import torch.distributed as dist
    rank, world, local = rank_info
    gpu, profile = _target(args, rank, local)
    env = os.environ
    if "MASTER_ADDR" in env and "RANK" not in env:   # srun: torch's env:// wants these names
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local))
        env.setdefault("MASTER_PORT", "29500")
    wait = env_int(env, "DETECT_CACHES_RENDEZVOUS_SECONDS", lo=1, hi=86400) \
        if env.get("DETECT_CACHES_RENDEZVOUS_SECONDS") else RENDEZVOUS_SECONDS
    _form_group(dist, rank, world, wait)
    # rank 0 names the folder (ranks that started a second apart would name it apart), claims it
    source, opened = None, ["", str(args.out or Path("detect-caches-results") /
                                    f"fleet-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")]
    if rank == 0:
        try:
            source = _open_fleet(args, Path(opened[1]))
        except DetectCachesError as exc:
            opened[0] = str(exc)
    dist.broadcast_object_list(opened, src=0)
    if opened[0]:
        dist.destroy_process_group()
        raise InputError(opened[0] if rank == 0 else f"rank 0 could not start the fleet: {opened[0]}")
    root = Path(opened[1])
    sub = root / f"{socket.gethostname()}-rank{rank}"
    try:
        return _measure_and_gather(dist, args, rank, world, gpu, profile, root, sub, source, measure_one, finish)
    finally:
        if rank == 0:
            from detect_caches.pipeline.outputs import release
            release(root)


def _measure_and_gather(dist, args, rank, world, gpu, profile, root, sub, source, measure_one, finish) -> int:
    result, error = None, ""
    try:
        result = measure_one(args, gpu, profile, sub)
    except DetectCachesError as exc:
        error = f"rank {rank} ({socket.gethostname()}): {exc}"
        print(f"detect-caches: error: {error}", file=sys.stderr)
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(json.dumps({"result": result, "error": error}, default=str), gathered, dst=0)
    codes = [0 if result is not None else 2]
    if rank == 0:
        items = [json.loads(g) for g in gathered]
        try:
            codes[0] = finish([i["result"] for i in items if i["result"]], args, root,
                              [i["error"] for i in items if i["error"]], same_time=True, source=source)
        except DetectCachesError as exc:
            print(f"detect-caches: error: {exc}", file=sys.stderr)
            codes[0] = 2
    dist.broadcast_object_list(codes, src=0)   # every rank exits with the fleet's verdict
    dist.destroy_process_group()
    return codes[0]
