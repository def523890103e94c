"""Benchmark of the main job on a real GPU: wall time (cold, in fresh processes) and its split,
measurement counts, plateau and peak bandwidths against the physical ceilings and gpu-benches,
and the capacities of repeated runs, checked against the targets. One JSON and one Markdown record.

    python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --out bench-out [--timing device]
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

# gpu-benches on the same H200 (../shared/notes/gpu-findings.md), GB/s, and its time
GPU_BENCHES_H200 = {"L1": (25000, 29000), "L2": (9500, 10000), "HBM": (4720, 4720)}
GPU_BENCHES_SECONDS = "83 s running + 21 s compiling (L1 and L2 sweeps), no boundary found by itself"
TARGETS = {"wall_s": 20, "measurements": 300, "L1_share": 0.95, "L2_gbs": 10500, "HBM_gbs": 4750,
           "L1_kib_spread": 2, "L2_rel_spread": 0.02}


def one_run(args, i: int) -> dict:
    out = Path(args.out) / f"run{i + 1}"
    cmd = [sys.executable, "-m", "detect_caches", "--quiet", "--out", str(out), "--timing", args.timing]
    cmd += ["--simulate", args.simulate] if args.simulate else ["--gpu", str(args.gpu)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"run {i + 1} failed: {proc.stderr.strip()}")
    result = json.loads((out / "result.json").read_text())
    result["_wall_s"] = wall
    return result


def run_record(r: dict) -> dict:
    m = r["method"]
    sweeps = m.get("sweeps", {})
    return {
        "wall_s": round(r["_wall_s"], 2), "elapsed_s": r["elapsed_s"], "measurements": r["measurements"],
        "split_s": {"start-up (python, torch, device)": m.get("process_seconds_before_measuring"),
                    "compile (first launches)": m.get("compile_seconds"),
                    **{f"{k} sweep": v.get("seconds") for k, v in sweeps.items()},
                    "peak probes": (m.get("peak_probes") or {}).get("seconds"),
                    "analysis": m.get("analysis_seconds")},
        "sweep_measurements": {k: v.get("measurements") for k, v in sweeps.items()},
        "levels": [{k: lv.get(k) for k in ("name", "scope", "capacity_bytes", "capacity_low_bytes",
                                            "capacity_high_bytes", "onset_bytes", "bandwidth_gbs",
                                            "peak_bandwidth_gbs", "peak_launch", "ceiling_gbs", "confidence")}
                   for lv in r["levels"]],
        "sm_clock_seen_mhz": m.get("sm_clock_seen_mhz"), "timing": m.get("timing"),
        "warnings": r.get("warnings", []),
    }


def verdicts(rec: dict) -> list[list[str]]:
    runs = rec["runs"]
    best = lambda name: max((lv.get("peak_bandwidth_gbs") or lv["bandwidth_gbs"]) for r in runs  # noqa: E731
                            for lv in r["levels"] if lv["name"] == name)
    level = lambda r, name: next((lv for lv in r["levels"] if lv["name"] == name), None)  # noqa: E731
    rows = []
    walls = [r["wall_s"] for r in runs]
    rows.append(["wall time, cold", f"<= {TARGETS['wall_s']} s", f"{min(walls):.1f}-{max(walls):.1f} s",
                 "met" if max(walls) <= TARGETS["wall_s"] else "missed"])
    ms = [r["measurements"] for r in runs]
    rows.append(["measurements", f"<= {TARGETS['measurements']}", f"{min(ms)}-{max(ms)}",
                 "met" if max(ms) <= TARGETS["measurements"] else "missed"])
    l1 = [level(r, "L1") for r in runs]
    if all(l1) and l1[0].get("ceiling_gbs"):
        shares = [lv["bandwidth_gbs"] / lv["ceiling_gbs"] for lv in l1]
        rows.append(["L1 plateau", ">= 95% of ceiling", f"{min(shares):.1%}-{max(shares):.1%}",
                     "met" if min(shares) >= TARGETS["L1_share"] else "missed"])
    for name, key in (("L2", "L2_gbs"), ("HBM", "HBM_gbs")):
        lv = [level(r, name) for r in runs]
        if all(lv):
            plat = [x["bandwidth_gbs"] for x in lv]
            peak = [x.get("peak_bandwidth_gbs") or x["bandwidth_gbs"] for x in lv]
            rows.append([f"{name} plateau (peak probe)", f">= {TARGETS[key] / 1000:.2f} TB/s",
                         f"{min(plat) / 1000:.2f}-{max(plat) / 1000:.2f} TB/s "
                         f"(peak {min(peak) / 1000:.2f}-{max(peak) / 1000:.2f})",
                         "met" if best(name) >= TARGETS[key] else "missed"])
    for name, key in (("L1", "L1_kib_spread"), ("L2", "L2_rel_spread")):
        caps = [lv["capacity_bytes"] for r in runs if (lv := level(r, name)) and lv.get("capacity_bytes")]
        if len(caps) == len(runs) and caps:
            spread = max(caps) - min(caps)
            if name == "L1":
                rows.append(["L1 capacity over runs", "+-1 KiB", f"{', '.join(f'{c / 1024:.1f}' for c in caps)} KiB",
                             "met" if spread <= TARGETS[key] * 1024 else "missed"])
            else:
                rel = spread / statistics.median(caps)
                rows.append(["L2 capacity over runs", "+-1%", f"{', '.join(f'{c / 2**20:.2f}' for c in caps)} MiB "
                             f"({rel:.2%} spread)", "met" if rel <= TARGETS[key] else "missed"])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--gpu", type=int)
    src.add_argument("--simulate")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timing", choices=("events", "device"), default="events")
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=False)
    runs = [one_run(args, i) for i in range(args.runs)]
    first = runs[0]
    rec = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": first["device"], "timing": args.timing,
           "runs": [run_record(r) for r in runs]}
    dev = first["device"]
    lines = [f"# detect-caches benchmark, {rec['date']} (timing: {args.timing})", "",
             f"Device: {dev['name']} ({'SIMULATED' if dev.get('simulated') else 'real hardware'}), "
             f"driver {dev.get('driver')}, torch {dev.get('torch')}, triton {dev.get('triton')}", "",
             "| run | wall s | measurements | split (s) | levels: capacity / plateau / peak |", "|---|---|---|---|---|"]
    for i, r in enumerate(rec["runs"]):
        split = ", ".join(f"{k} {v:.2f}" for k, v in r["split_s"].items() if v is not None)
        lv = "; ".join(f"{l['name']} {(l['capacity_bytes'] or 0) / 1024:,.0f} KiB / {l['bandwidth_gbs']:,.0f} / "
                       f"{l.get('peak_bandwidth_gbs') or 0:,.0f} GB/s" for l in r["levels"])
        lines.append(f"| {i + 1} | {r['wall_s']:.1f} | {r['measurements']} | {split} | {lv} |")
    rows = verdicts(rec)
    rec["verdicts"] = rows
    lines += ["", "| figure | target | measured | verdict |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if not dev.get("simulated") and "H200" in dev.get("name", ""):
        lines += ["", f"gpu-benches on this card (gpu-findings.md, not re-run): "
                      + ", ".join(f"{k} {lo / 1000:.2f}-{hi / 1000:.2f} TB/s" for k, (lo, hi) in GPU_BENCHES_H200.items())
                      + f"; {GPU_BENCHES_SECONDS}."]
    Path(args.out, "bench.json").write_text(json.dumps(rec, indent=2))
    Path(args.out, "bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
