"""Benchmark of the main job on a real GPU: wall time (cold, in fresh processes), its split,
measurement counts, plateau bandwidths against the physical ceilings, and the capacities of
repeated runs. Writes one JSON and one Markdown record.

    python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --out bench-out
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GPU_BENCHES_H200 = {"L1": (25000, 29000), "L2": (9500, 10000), "HBM": (4720, 4720)}  # GB/s, gpu-findings.md
TARGETS = {"wall_s": 20, "measurements": 300, "L1_share": 0.95, "L2_gbs": 10500, "HBM_gbs": 4750}


def one_run(args, i: int) -> dict:
    out = Path(args.out) / f"run{i + 1}"
    cmd = [sys.executable, "-m", "detect_caches", "--quiet", "--out", str(out)]
    cmd += ["--simulate", args.simulate] if args.simulate else ["--gpu", str(args.gpu)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"run {i + 1} failed: {proc.stderr.strip()}")
    result = json.loads((out / "result.json").read_text())
    result["_wall_s"] = wall
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--gpu", type=int)
    src.add_argument("--simulate")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=False)
    runs = [one_run(args, i) for i in range(args.runs)]
    first = runs[0]
    rec = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": first["device"], "runs": []}
    for r in runs:
        sweeps = r["method"].get("sweeps", {})
        rec["runs"].append({
            "wall_s": round(r["_wall_s"], 2), "elapsed_s": r["elapsed_s"], "measurements": r["measurements"],
            "sweep_seconds": {k: v.get("seconds") for k, v in sweeps.items()},
            "sweep_measurements": {k: v.get("measurements") for k, v in sweeps.items()},
            "levels": [{k: lv.get(k) for k in ("name", "scope", "capacity_bytes", "capacity_low_bytes",
                                                "capacity_high_bytes", "onset_bytes", "bandwidth_gbs",
                                                "ceiling_gbs", "confidence")} for lv in r["levels"]],
            "sm_clock_seen_mhz": r["method"].get("sm_clock_seen_mhz"),
        })
    lines = [f"# detect-caches benchmark, {rec['date']}", "",
             f"Device: {first['device']['name']} ({'SIMULATED' if first['device'].get('simulated') else 'real hardware'}), "
             f"driver {first['device'].get('driver')}, torch {first['device'].get('torch')}, "
             f"triton {first['device'].get('triton')}", "",
             "| run | wall s (process) | measurements | private s | shared s | levels (capacity / bandwidth) |",
             "|---|---|---|---|---|---|"]
    for i, r in enumerate(rec["runs"]):
        lv = "; ".join(f"{l['name']} {l['capacity_bytes'] / 1024 if l['capacity_bytes'] else 0:,.0f} KiB / "
                       f"{l['bandwidth_gbs']:,.0f} GB/s" for l in r["levels"])
        ss = r["sweep_seconds"]
        lines.append(f"| {i + 1} | {r['wall_s']:.1f} | {r['measurements']} | {ss.get('private', 0) or 0:.1f} | "
                     f"{ss.get('shared', 0) or 0:.1f} | {lv} |")
    caps: dict[str, list[float]] = {}
    for r in rec["runs"]:
        for l in r["levels"]:
            if l["capacity_bytes"]:
                caps.setdefault(l["name"], []).append(l["capacity_bytes"])
    lines += ["", "| level | capacities over runs | spread (max-min) | bandwidth / ceiling (run 1) |", "|---|---|---|---|"]
    for l in rec["runs"][0]["levels"]:
        c = caps.get(l["name"], [])
        spread = (max(c) - min(c)) if c else None
        share = f"{l['bandwidth_gbs'] / l['ceiling_gbs']:.1%}" if l.get("ceiling_gbs") else "-"
        lines.append(f"| {l['name']} | {', '.join(f'{x / 1024:,.0f} KiB' for x in c) or '-'} | "
                     f"{'-' if spread is None else f'{spread / 1024:,.0f} KiB ({spread / statistics.median(c):.1%})'} | "
                     f"{l['bandwidth_gbs']:,.0f} GB/s, {share} |")
    rec["capacity_runs"] = caps
    Path(args.out, "bench.json").write_text(json.dumps(rec, indent=2))
    Path(args.out, "bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
