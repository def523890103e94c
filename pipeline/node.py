"""Many GPUs: every listed GPU of a node in its own process (`--gpu all`, `--gpu 0,2,5`), and a
fleet launched by torchrun or Slurm's srun, gathered with torch.distributed (gloo: the gather
moves a few kilobytes of JSON, and gloo needs no GPU). A node run hands SIGTERM and SIGINT on to
its children and still writes the summary of what they measured; a distributed run that cannot
form its group says so within DETECT_CACHES_RENDEZVOUS_SECONDS (pipeline.ranks)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from detect_caches.errors import DetectCachesError, InputError
from detect_caches.validate import env_int


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
        from detect_caches.measure.gpu.facts import gpu_count
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


def check_targets(targets: list[tuple[int | None, str | None]], source) -> None:
    """Before the node's folder is claimed: every GPU index one the driver counts, each readable
    simulated profile's GPU with its baseline where a folder of runs is given. A node where no
    profile can be read stops here; one bad profile among good ones is its GPU's failure, named
    with the others' results (a node keeps what it can measure)."""
    from detect_caches.pipeline.api import open_device
    from detect_caches.reports.baseline import device_of
    count, bad = None, []
    for gpu, profile in targets:
        if profile is not None:
            try:
                device = open_device(gpu, profile)
            except InputError as exc:
                bad.append(str(exc))
                continue
            if source is not None:
                source.pick(device_of(device.facts))
            continue
        if count is None:
            from detect_caches.measure.gpu.clocks import nvidia_gpu_count
            count = nvidia_gpu_count() or -1
        if count >= 0 and gpu >= count:
            raise InputError(f"--gpu {gpu}: the driver counts {count} GPU(s) (0 to {count - 1})")
    if bad and len(bad) == len(targets):
        raise InputError(bad[0])


def _child_argv(args, gpu: int | None, profile: str | None, out: Path) -> list[str]:
    # each child's doubts are judged by the parent, over the whole node
    argv = [sys.executable, "-m", "detect_caches", "--quiet", "--accept-incomplete", "--out", str(out),
            "--budget", str(args.budget), "--grid-multiplier", str(args.grid_multiplier), "--sweeps", args.sweeps,
            "--timing", args.timing]
    if args.no_peaks:
        argv.append("--no-peaks")
    if args.no_latency:
        argv.append("--no-latency")
    if args.max_working_set:
        argv += ["--max-working-set", str(args.max_working_set)]
    if profile is not None:
        return argv + ["--simulate", profile, "--sim-index", str(gpu or 0)]
    return argv + ["--gpu", str(gpu)]


def run_node(args, targets: list[tuple[int | None, str | None]], finish) -> int:
    """One process per GPU, all at once; one folder per GPU plus the node summary. The baseline
    (a file, or a folder of runs: each GPU's own latest earlier run) is loaded and checked first."""
    from detect_caches.pipeline.outputs import claim_out_dir, release
    from detect_caches.reports.baseline import BaselineSource
    source = BaselineSource.load(args.baseline)
    check_targets(targets, source)
    root = claim_out_dir(args.out or Path("detect-caches-results") /
                         f"node-{socket.gethostname()}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    procs = []
    stop = {"signal": None}

    def forward(signum, _frame):
        stop["signal"] = signum
        for *_, proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)
    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    # the host's cores split between the children's fit workers (pipeline.fitpool)
    from detect_caches.pipeline.fitpool import usable_cores, workers_for
    env = dict(os.environ, DETECT_CACHES_FIT_WORKERS=str(workers_for(usable_cores(), len(targets))))
    try:
        for gpu, profile in targets:
            sub = root / f"gpu{gpu}"
            log = open(root / f"gpu{gpu}.log", "w")
            procs.append((gpu, sub, log, subprocess.Popen(_child_argv(args, gpu, profile, sub), stdout=log,
                                                          stderr=subprocess.STDOUT, env=env)))
        _warm_fleet_report()   # while the children measure: the parent has nothing else to do
        results, failed = [], []
        for gpu, sub, log, proc in procs:
            rc = proc.wait()
            log.close()
            result = _read(sub / "result.json")
            if result is None:
                last = _last_line(root / f"gpu{gpu}.log")
                failed.append(f"GPU {gpu}: exit {rc}" + (f" ({last})" if last else "") +
                              f", see {root / f'gpu{gpu}.log'}")
            else:
                results.append(result)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        release(root)
    for line in failed:
        print(f"detect-caches: {line}", file=sys.stderr)
    stopped = (f"stopped by signal {stop['signal']}; each GPU's measurements so far are in "
               f"{root}/gpu*/measurements.csv") if stop["signal"] is not None else ""
    if not results:   # each GPU's failure is on its own line above
        raise DetectCachesError(f"no GPU produced a result{': ' + stopped if stopped else ''}")
    if stopped:
        failed.append(stopped)
    return finish(results, args, root, failed, same_time=True, source=source)


def _warm_fleet_report() -> None:
    """Import the fleet report's stack and set up matplotlib's fonts in a thread (about a second
    that would otherwise follow the children's end)."""
    def work():
        try:
            import detect_caches.reports.fleet_plot  # noqa: F401
            from detect_caches.reports.plot import warm_fonts
            warm_fonts()
        except Exception:     # the report imports again after the children and says what failed
            pass
    threading.Thread(target=work, name="detect-caches-fleet-warm-up", daemon=True).start()


def _last_line(path: Path) -> str:
    try:
        lines = [l for l in path.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return lines[-1].replace("detect-caches: error: ", "")[:300] if lines else ""


def _read(path: Path) -> dict | None:
    from detect_caches.reports.result_json import read_result
    try:
        return read_result(path)
    except DetectCachesError:
        return None


# -- torchrun / srun ------------------------------------------------------------------------

def distributed_rank() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when launched by torchrun or srun, else None. The variables
    are checked: a rank that is not a number is an error, not a crash."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        world = env_int(env, "WORLD_SIZE", lo=1)
        rank = env_int(env, "RANK", lo=0, hi=world - 1)
        local = env_int(env, "LOCAL_RANK", lo=0) if env.get("LOCAL_RANK") else rank
        return rank, world, local
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "MASTER_ADDR" in env:
        world = env_int(env, "SLURM_NTASKS", lo=1)
        rank = env_int(env, "SLURM_PROCID", lo=0, hi=world - 1)
        local = env_int(env, "SLURM_LOCALID", lo=0) if env.get("SLURM_LOCALID") else rank
        return rank, world, local
    return None


def run_rank(args, rank_info: tuple[int, int, int], measure_one, finish) -> int:
    from detect_caches.pipeline.ranks import run_rank as run
    return run(args, rank_info, measure_one, finish)
