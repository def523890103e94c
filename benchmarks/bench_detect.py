"""Benchmark of the main job on a real GPU: wall time of `detect-caches --gpu N` in fresh processes
(the first with an empty Triton cache, as after an install) and its split against the floor
(torch's import with CUDA init), measurements needed, plateau and peak bandwidths against the
physical ceilings and against gpu-benches run on the same card in the same session (ratios at the
same working-set sizes), latencies against gpu-latency, and run-to-run repeatability next to what
each run said. One JSON and one Markdown record.

    python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --out bench-out [--peers PEERS_DIR]
        [--no-latency-runs 2] [--node]

PEERS_DIR: the output of ../shared/peers/run-gpu-benches.sh on the same GPU (gpu-cache.txt,
gpu-l2-cache.txt, gpu-latency.txt; any may be missing).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_START = "import time; t = time.perf_counter(); "
_TORCH = "import torch; torch.cuda.init(); torch.empty(1, device='cuda'); print(time.perf_counter() - t)"
FLOOR_CODE = _START + _TORCH
# the same with the bytecode cache the command line keeps where Python keeps none (pipeline/bytecode.py)
CACHED_FLOOR_CODE = _START + "from detect_caches.pipeline import bytecode; bytecode.install(); " + _TORCH


WORK = [ROOT]   # where the timed processes start: the checkout, or (--installed) an empty folder


def fresh(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=WORK[0], capture_output=True, text=True, env=env)
    return time.perf_counter() - t, proc


def floor_seconds(gpu: int, env: dict, code: str = FLOOR_CODE) -> list[float]:
    """Wall time of a fresh process that only imports torch and creates the CUDA context."""
    out = []
    for _ in range(2):
        wall, proc = fresh([sys.executable, "-c", code], dict(env, CUDA_VISIBLE_DEVICES=str(gpu)))
        if proc.returncode == 0:
            out.append(round(wall, 2))
    return out


def one_run(args, out: Path, env: dict, extra: list[str]) -> dict:
    what = ["--simulate", args.simulate] if args.simulate else ["--gpu", str(args.gpu)]
    cmd = [sys.executable, "-m", "detect_caches", "--quiet", "--out", str(out), *what, *extra]
    started = time.time()
    wall, proc = fresh(cmd, env)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{out.name} failed: {proc.stderr.strip()}")
    result = json.loads((out / "result.json").read_text())
    result["_wall_s"] = wall
    result["_dir"] = str(out)
    # the last file written (its modification time) against the process's start and end
    written = max(f.stat().st_mtime for f in out.iterdir() if f.is_file())
    result["_written_s"] = min(max(written - started, 0.0), wall)
    return result


def split(r: dict) -> dict:
    m = r["method"]
    sweeps = m.get("sweeps", {})
    lat = m.get("latency") or {}
    parts = {**{f"start-up: {k}": v for k, v in (m.get("startup_seconds") or {}).items()},
             "start-up, all (process start to the measuring's start)": m.get("process_seconds_before_measuring"),
             "of the stages below, compiling or loading kernels on first launches": m.get("compile_seconds"),
             **{f"{k} sweep": v.get("seconds") for k, v in sweeps.items()},
             "latency sweep": lat.get("seconds"),
             "waiting on the warm-up thread (plotting and analysis imports, fonts; beside the latency sweep)":
                 m.get("warm_up_wait_seconds"),
             "refining (more points where an interval stayed wide or noise kept a fall from repeating)":
                 (m.get("interval_refine") or {}).get("seconds"),
             "of the stage above, the precision readings": (m.get("precision_readings") or {}).get("seconds"),
             "latency probes": lat.get("probe_seconds"),
             "peak probes": (m.get("peak_probes") or {}).get("seconds"),
             "carveout sweeps": (m.get("carveouts") or {}).get("seconds"),
             "analysis": m.get("analysis_seconds"),
             "of the stages above, the bandwidth sweeps' analysis beside the latency sweep":
                 m.get("analysis_beside_seconds")}
    parts = {k: v for k, v in parts.items() if v is not None}
    measured = sum(v for k, v in parts.items() if not k.startswith(("start-up: ", "of the stage")))
    plot = m.get("plot") or {}
    if plot.get("waited_seconds") is not None:
        parts["waiting on the plot (rendered beside the probes; its render alone below)"] = plot["waited_seconds"]
        parts["of the stages above, the plot's render (beside the probes, then waited on)"] = plot.get("render_seconds")
        measured += plot["waited_seconds"]
    if "_written_s" in r:
        parts["writing the files" + ("" if plot else ", waiting on the plot")] = round(r["_written_s"] - measured, 3)
        parts["process exit (after the last file)"] = round(r["_wall_s"] - r["_written_s"], 3)
    else:
        parts["the rest (writing" + ("" if plot else ", waiting on the plot") + ", exit)"] = round(r["_wall_s"] - measured, 3)
    return parts


def level(r: dict, name: str) -> dict | None:
    return next((lv for lv in r["levels"] if lv["name"] == name), None)


# -- peers ----------------------------------------------------------------------------------

def _rows(path: Path, parse) -> list[tuple[float, float]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            row = parse(line.split())
        except (ValueError, IndexError):
            continue
        if row:
            out.append(row)
    return out


def peers(folder: Path | None) -> dict:
    """(bytes, GB/s) from gpu-cache (per SM) and gpu-l2-cache (whole device); (bytes, ns) from
    gpu-latency (ns per hop = ms x 1e6 / iterations: its cycle column uses an idle clock)."""
    if folder is None:
        return {}
    kb = 1024
    cache = _rows(folder / "gpu-cache.txt", lambda t: (float(t[0]) * kb, float(t[4])) if t[1] == "kB" else None)
    l2 = _rows(folder / "gpu-l2-cache.txt", lambda t: (float(t[2]) * kb, float(t[6])) if t[1] == "kB" else None)
    lat = _rows(folder / "gpu-latency.txt",
                lambda t: (float(t[2]) * kb, float(t[3]) * 1e6 / float(t[0])) if len(t) == 5 else None)
    return {"gpu-cache": cache, "gpu-l2-cache": l2, "gpu-latency": lat}


def nearest(rows: list[tuple[float, float]], size: float) -> tuple[float, float] | None:
    return min(rows, key=lambda r: abs(math.log(r[0] / size))) if rows and size > 0 else None


def peak_probe(run_dir: Path, lv: dict) -> tuple[float, float]:
    """(working set bytes, GB/s) of a level's best figure: its winning peak probe (the reading
    the result reports), or the plateau at its geometric middle when the sweep's launch won."""
    peak = lv.get("peak_bandwidth_gbs")
    with open(run_dir / "measurements.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["phase"] == "peak"]
    best = min(rows, key=lambda r: abs(float(r["bandwidth_gbs"]) / peak - 1), default=None) if peak else None
    if best is not None and abs(float(best["bandwidth_gbs"]) / peak - 1) < 1e-3:
        return float(best["working_set_bytes"]), float(best["bandwidth_gbs"])
    return math.sqrt(lv["plateau_lo_bytes"] * lv["plateau_hi_bytes"]), lv["bandwidth_gbs"]


def peer_rows(runs: list[dict], p: dict) -> list[list[str]]:
    """Each level's best figure (the peak probe, else the plateau) against the peer at the same size."""
    rows = []
    sources = {"L1": "gpu-cache", "L2": "gpu-l2-cache", "HBM": "gpu-l2-cache"}
    for name, peer in sources.items():
        if not p.get(peer):
            continue
        for i, r in enumerate(runs):
            lv = level(r, name)
            if lv is None:
                continue
            size, ours = peak_probe(Path(r["_dir"]), lv)
            inside = [b for w, b in p[peer] if lv["plateau_lo_bytes"] <= w <= lv["plateau_hi_bytes"]]
            hit = nearest(p[peer], size)
            if hit is None:
                continue
            rows.append([name, f"run {i + 1}", f"{size / 2**20:.2f} MiB" if size >= 2**20 else f"{size / 1024:.0f} KiB",
                         f"{ours:,.0f}", f"{hit[1]:,.0f} at {hit[0] / 2**20:.2f} MiB" if hit[0] >= 2**20
                         else f"{hit[1]:,.0f} at {hit[0] / 1024:.0f} KiB", f"{ours / hit[1]:.3f}",
                         f"{lv['bandwidth_gbs']:,.0f}", f"{max(inside):,.0f}" if inside else "-"])
    return rows


def latency_rows(runs: list[dict], p: dict) -> list[list[str]]:
    lat = p.get("gpu-latency") or []
    if not lat:
        return []
    rows = []
    r = runs[0]
    caches = [lv for lv in r["levels"] if lv.get("capacity_bytes")]
    for lv in r["levels"]:
        if lv.get("latency_ns") is None:
            continue
        if lv.get("capacity_bytes"):
            lo = caches[caches.index(lv) - 1]["capacity_bytes"] * 2 if caches.index(lv) else 4096
            hi = (lv.get("latency_steps") or [{}])[0].get("up_to_bytes") or lv["capacity_bytes"]
            window = (lo, max(lo, hi * 0.8))
        else:
            window = (4 * max(c["capacity_bytes"] for c in caches), float("inf"))
        vals = [ns for size, ns in lat if window[0] <= size <= window[1]]
        if vals:
            peer = statistics.median(vals)
            rows.append([lv["name"], f"{lv['latency_ns']:.1f}", f"{peer:.1f} ({len(vals)} sizes)",
                         f"{lv['latency_ns'] / peer:.3f}"])
        for step in lv.get("latency_steps") or []:
            rows.append([f"{lv['name']} step", f"{step['latency_ns']:.1f} up to {step['up_to_bytes'] / 2**20:.1f} MiB",
                         "-", "-"])
    return rows


# -- repeatability ----------------------------------------------------------------------------

def repeat_rows(runs: list[dict]) -> list[list[str]]:
    rows = []
    for lv0 in runs[0]["levels"]:
        name = lv0["name"]
        for key, rep in (("capacity_bytes", "capacity_repeatability"), ("bandwidth_gbs", "bandwidth_repeatability")):
            vals = [lv[key] for r in runs if (lv := level(r, name)) and lv.get(key)]
            said = [lv[rep] for r in runs if (lv := level(r, name)) and lv.get(rep) is not None]
            if len(vals) < 2:
                continue
            seen = statistics.pstdev(vals) / statistics.mean(vals)
            span = (max(vals) - min(vals)) / statistics.median(vals)
            unit = (lambda v: f"{v / 2**20:.2f} MiB" if v >= 2**20 else f"{v / 1024:.1f} KiB") if key == "capacity_bytes" \
                else (lambda v: f"{v:,.0f} GB/s")
            rows.append([name, key.split("_")[0], ", ".join(unit(v) for v in vals), f"{seen:.2%}", f"{span:.2%}",
                         f"{statistics.median(said):.2%}" if said else "-"])
    return rows


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--simulate", help="a simulated GPU instead (to try the script; its timings mean nothing)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-latency-runs", type=int, default=0, help="also time this many runs with --no-latency")
    ap.add_argument("--no-latency-first", action="store_true",
                    help="run the --no-latency runs first (the first of them with the empty Triton cache)")
    ap.add_argument("--peers", type=Path, help="run-gpu-benches.sh output for this GPU")
    ap.add_argument("--node", action="store_true", help="also time `--gpu all` (the node of every GPU)")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    ap.add_argument("--installed", action="store_true",
                    help="time the installed package: start each process in an empty folder, not the checkout")
    ap.add_argument("--report-only", type=Path, metavar="DIR",
                    help="write the record again from DIR's runs (e.g. with peers that finished later)")
    args = ap.parse_args()
    args.out = args.out.resolve()
    if args.installed:
        WORK[0] = Path(tempfile.mkdtemp(prefix="bench-installed-"))
    if args.report_only:
        args.out = args.report_only
        old = json.loads((args.out / "bench.json").read_text())
        floor, node, cached_floor = old["floor_s"], old["node"], old.get("cached_floor_s", [])
        args.no_latency_first = old.get("no_latency_first", False)

        def load(prefix: str, rows: list[dict]) -> list[dict]:
            out = []
            for i, row in enumerate(rows):
                r = json.loads((args.out / f"{prefix}{i + 1}" / "result.json").read_text())
                extra = {"_written_s": row["written_s"]} if row.get("written_s") is not None else {}
                out.append(dict(r, _wall_s=row["wall_s"], _dir=str(args.out / f"{prefix}{i + 1}"), **extra))
            return out
        runs = load("run", old["runs"])
        quick = load("no-latency", old["no_latency_runs"])
    else:
        args.out.mkdir(parents=True, exist_ok=False)
        env = dict(os.environ)
        env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-triton-")   # empty: as after an install
        env["DETECT_CACHES_BYTECODE_CACHE"] = tempfile.mkdtemp(prefix="bench-bytecode-")   # likewise
        floor = [] if args.simulate else floor_seconds(args.gpu, env)
        def full_runs():
            return [one_run(args, args.out / f"run{i + 1}", env, []) for i in range(args.runs)]

        def quick_runs():
            return [one_run(args, args.out / f"no-latency{i + 1}", env, ["--no-latency"])
                    for i in range(args.no_latency_runs)]
        if args.no_latency_first:   # the first --no-latency run finds the empty Triton cache
            quick = quick_runs()
            runs = full_runs()
        else:
            runs = full_runs()
            quick = quick_runs()
        cached_floor = [] if args.simulate else floor_seconds(args.gpu, env, CACHED_FLOOR_CODE)
        node = None
        if args.node:
            wall, proc = fresh([sys.executable, "-m", "detect_caches", "--gpu", "all", "--out",
                                str(args.out / "node")], env)
            node = {"wall_s": round(wall, 2), "exit": proc.returncode, "stdout_tail": proc.stdout[-1500:]}
    p = peers(args.peers)
    dev = runs[0]["device"]
    lines = [f"# detect-caches benchmark, {time.strftime('%Y-%m-%d %H:%M')}", "",
             f"Device: {dev['name']} {dev.get('uuid', '')}, driver {dev.get('driver')}, torch {dev.get('torch')}, "
             f"triton {dev.get('triton')}; SM clock seen {runs[0]['method'].get('sm_clock_seen_mhz')} MHz.", "",
             f"Floor (fresh process: import torch, CUDA context): {', '.join(f'{f:.2f}' for f in floor)} s"
             + (f"; with the command line's bytecode cache, after the runs: {', '.join(f'{f:.2f}' for f in cached_floor)} s"
                if cached_floor else "") + ".", ""]
    rows = []
    for tag, group in (("full", runs), ("--no-latency", quick)):
        for i, r in enumerate(group):
            empty = i == 0 and (tag == "full") != bool(args.no_latency_first and quick)
            rows.append([f"{tag} {i + 1}" + (" (empty Triton and bytecode caches)" if empty else ""),
                         f"{r['_wall_s']:.2f}", str(r["measurements"]),
                         f"{r['_wall_s'] - min(floor):.2f}" if floor else "-",
                         ", ".join(f"{k} {v:.2f}" for k, v in split(r).items())])
    lines += table(["run", "wall s", "measurements", "beyond the floor s", "split (s)"], rows) + [""]
    if node:
        lines += [f"Node (`--gpu all`): {node['wall_s']:.2f} s, exit {node['exit']}.", ""]
    lv_rows = []
    for i, r in enumerate(runs):
        for lv in r["levels"]:
            ceiling = lv.get("ceiling_gbs")
            lv_rows.append([f"run {i + 1}", lv["name"], f"{(lv.get('capacity_bytes') or 0) / 1024:,.1f} KiB"
                            if lv.get("capacity_bytes") else "-", lv.get("fall_shape") or "-",
                            f"{lv['bandwidth_gbs']:,.0f}", f"{lv.get('peak_bandwidth_gbs') or 0:,.0f}",
                            f"{lv['bandwidth_gbs'] / ceiling:.1%}" if ceiling else "-",
                            f"{lv['latency_ns']:.1f}" if lv.get("latency_ns") else "-"])
    lines += table(["run", "level", "capacity", "fall", "plateau GB/s", "peak GB/s", "plateau / ceiling", "latency ns"],
                   lv_rows) + [""]
    pr = peer_rows(runs, p)
    if pr:
        lines += ["Against gpu-benches on the same GPU in this session (best figure at the same working set):", ""]
        lines += table(["level", "run", "probe size", "ours GB/s", "peer GB/s at nearest size", "ratio",
                        "our plateau GB/s", "peer best in our plateau's range"], pr) + [""]
    lr = latency_rows(runs, p)
    if lr:
        lines += ["Latency against gpu-latency (ns per hop, median over the level's sizes):", ""]
        lines += table(["level", "ours ns", "gpu-latency ns", "ratio"], lr) + [""]
    rr = repeat_rows(runs)
    if rr:
        lines += ["Repeatability between the runs, next to what each run said (1 sigma):", ""]
        lines += table(["level", "figure", "runs", "sd seen", "max-min", "said (median)"], rr) + [""]
    rec = {"floor_s": floor, "cached_floor_s": cached_floor, "no_latency_first": bool(args.no_latency_first),
           "runs": [{"wall_s": r["_wall_s"], "written_s": r.get("_written_s"), "measurements": r["measurements"],
                     "split_s": split(r), "levels": r["levels"], "method": r["method"]} for r in runs],
           "no_latency_runs": [{"wall_s": r["_wall_s"], "written_s": r.get("_written_s"), "split_s": split(r)}
                               for r in quick], "node": node,
           "peer_rows": pr, "latency_rows": lr, "repeat_rows": rr, "device": dev}
    (args.out / "bench.json").write_text(json.dumps(rec, indent=1, default=str))
    (args.out / "bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
