"""The two timing methods side by side on the same points: every sweep point of a finished run
(its measurements.csv) is measured again with CUDA events + the load-iteration regression and
with the in-kernel clock, alternating, in one process; both curves go through the detector.
Writes timing.csv (both bandwidths per point) and timing.md (per point ratios, per level
plateaus and capacities from each method).

    python3 benchmarks/compare_timing.py --gpu 0 --points RUN/measurements.csv --out timing-out
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detect_caches.detector.analyze import detect_levels  # noqa: E402
from detect_caches.measure.gpu.triton_gpu import TritonGPU  # noqa: E402
from detect_caches.measure.launch import LaunchConfig  # noqa: E402
from detect_caches.measure.point import PointMeter, PointPolicy  # noqa: E402
from detect_caches.reader import read_measurements  # noqa: E402

TOLERANCE = 0.05   # the two methods should agree within 5% on plateaus and capacities


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--points", type=Path, required=True, help="a measurements.csv whose sweep points to re-measure")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=False)
    source = [r for r in read_measurements(args.points) if r.phase != "peak"]
    gpu = TritonGPU(args.gpu)
    meters = {"events": PointMeter(gpu, PointPolicy(timing="events")),
              "device": PointMeter(gpu, PointPolicy(timing="device"))}
    seen, records = set(), {"events": [], "device": []}
    rows = []
    for r in sorted(source, key=lambda r: (r.sweep, r.stream_bytes)):
        key = (r.sweep, r.stream_bytes)
        if key in seen:
            continue
        seen.add(key)
        cfg = LaunchConfig(r.sweep, r.programs, r.block_size, r.num_warps, 1, r.load_flavour,
                           row_by_sm=r.sweep == "private" and r.rows < r.programs)
        got = {name: m.measure(cfg, r.stream_bytes, phase="coarse") for name, m in meters.items()}
        for name, m in got.items():
            records[name].append(m)
        ratio = got["device"].bandwidth_gbs / got["events"].bandwidth_gbs
        rows.append({"sweep": r.sweep, "working_set_bytes": got["events"].working_set_bytes,
                     "events_gbs": round(got["events"].bandwidth_gbs, 1), "events_r2": got["events"].r2,
                     "device_gbs": round(got["device"].bandwidth_gbs, 1), "device_flags": got["device"].flags,
                     "ratio_device_to_events": round(ratio, 4)})
    with open(args.out / "timing.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for name, recs in records.items():
        with open(args.out / f"{name}-measurements.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[fl.name for fl in dataclasses.fields(recs[0])])
            w.writeheader()
            w.writerows(dataclasses.asdict(x) for x in recs)
    det = {name: detect_levels(recs, gpu.facts) for name, recs in records.items()}
    lines = [f"# Timing methods side by side: {gpu.facts.name}", "",
             f"{len(rows)} points from {args.points}, each measured with both methods, alternating. "
             f"In-kernel clock: %globaltimer (32 ns steps seen), warm-up 2 passes, grid barrier, longest "
             f"program. Tolerance: {TOLERANCE:.0%}.", "",
             "| sweep | points | median device/events | min | max |", "|---|---|---|---|---|"]
    for sweep in ("private", "shared"):
        ratios = [x["ratio_device_to_events"] for x in rows if x["sweep"] == sweep]
        if ratios:
            lines.append(f"| {sweep} | {len(ratios)} | {statistics.median(ratios):.3f} | {min(ratios):.3f} | "
                         f"{max(ratios):.3f} |")
    lines += ["", "| level | events: capacity / plateau | device: capacity / plateau | capacity change | "
                  "plateau change | within tolerance |", "|---|---|---|---|---|---|"]
    dev_levels = {lv.name: lv for lv in det["device"].levels}
    for lv in det["events"].levels:
        other = dev_levels.get(lv.name)
        if other is None:
            lines.append(f"| {lv.name} | ... | absent | - | - | no |")
            continue
        cap = (other.capacity_bytes / lv.capacity_bytes - 1) if lv.capacity_bytes and other.capacity_bytes else None
        bw = other.bandwidth_gbs / lv.bandwidth_gbs - 1
        ok = abs(bw) <= TOLERANCE and (cap is None or abs(cap) <= TOLERANCE)
        fmt_cap = lambda x: f"{x.capacity_bytes / 1024:,.0f} KiB" if x.capacity_bytes else "-"  # noqa: E731
        lines.append(f"| {lv.name} | {fmt_cap(lv)} / {lv.bandwidth_gbs:,.0f} GB/s | {fmt_cap(other)} / "
                     f"{other.bandwidth_gbs:,.0f} GB/s | {'-' if cap is None else f'{cap:+.1%}'} | {bw:+.1%} | "
                     f"{'yes' if ok else 'no'} |")
    (args.out / "timing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
