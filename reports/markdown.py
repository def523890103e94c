"""report.md and the terminal summary."""
from __future__ import annotations

from detect_caches.reports import carveout_report
from detect_caches.reports.fmt import fmt_bytes, fmt_gbs, markdown_table

SCOPE_WORDS = {"per_cu": "per SM/CU", "per_xcd": "per XCD", "device": "device"}
CAPACITY_TEXT = (
    "A capacity is the number of bytes the level holds: the largest working set it still serves "
    "whole, read from the shape of its fall (hit rates from harmonically mixed bandwidths). A "
    "**cliff**: the last size before it (a tail of partial hits may follow). A **hashed-set fall** "
    "(symmetric around the size, as an LRU cache with hashed sets starts missing on some sets "
    "before it is full): its middle. A **tail** (random or pseudo-LRU replacement): where it "
    "starts, from a fitted kink. A **decline, then collapse**: the largest size still served at "
    "95%. A **broad fall**: where it begins (97%). A **step**: the last size measured at full "
    "speed. The interval is where the physical size can lie given the data; the repeatability "
    "is how much the capacity and the bandwidth move between runs of the same card (1 sigma, "
    "estimated inside the run). Capacities of `per_cu` levels are per SM/CU, of `per_xcd` "
    "levels per chiplet. Latency: a one-SM pointer chase over random cycles of 64-byte slots, ns "
    "from a device timer and SM cycles from the cycle counter; a level the chase sees in steps (the "
    "near and far halves of a split L2) lists each. Line: the bytes a line holds (chains of one "
    "element per 512 bytes against the dense curve); sector: for the L1, what a miss brings in "
    "from the L2 (chains in address order at 8-256 byte strides); for the L2, the unit it hands to "
    "the SMs (words read per second with loads that skip the L1, at 8-128 byte strides: they halve "
    "with each doubling of the stride up to the unit). Confidence (0 to 1): for a cache, how clearly "
    "its fall stands out from the noise, how narrow its capacity's interval is, how well the fall's "
    "shape fits the points, how repeatable the capacity is and whether a second segmentation agrees, "
    "less the share of noisy points at the boundary, raised where the latency knee agrees; for memory, "
    "how many points its plateau has and how flat it is. A level below 0.2 makes the result doubtful.")


def _capacity_cell(lv: dict) -> str:
    if lv.get("capacity_bytes") is None:
        return "-"
    return (f"{fmt_bytes(lv['capacity_bytes'])} ({fmt_bytes(lv.get('capacity_low_bytes'))} to "
            f"{fmt_bytes(lv.get('capacity_high_bytes'))})")


def _share(lv: dict) -> str:
    ceiling = lv.get("ceiling_gbs")
    return f"{lv['bandwidth_gbs'] / ceiling:.0%} of {fmt_gbs(ceiling)}" if ceiling else "-"


def _peak(lv: dict) -> str:
    peak = lv.get("peak_bandwidth_gbs")
    if not peak:
        return "-"
    ceiling = lv.get("ceiling_gbs")
    return fmt_gbs(peak) + (f" ({peak / ceiling:.0%})" if ceiling else "")


def _repeat(lv: dict) -> str:
    """How much the capacity and bandwidth move between runs of the same card (1 sigma)."""
    cap, bw = lv.get("capacity_repeatability"), lv.get("bandwidth_repeatability")
    cells = [f"{cap:.1%}" if cap is not None and lv.get("capacity_bytes") else "-",
             f"{bw:.1%}" if bw is not None else "-"]
    return " / ".join(cells)


def _latency(lv: dict) -> str:
    ns, cyc = lv.get("latency_ns"), lv.get("latency_cycles")
    if ns is None:
        return "-"
    text = f"{ns:.1f} ns" + (f" ({cyc:.0f} cyc)" if cyc else "")
    far = lv.get("latency_steps") or []
    if len(far) > 1:
        text += ", then " + ", ".join(f"{s['latency_ns']:.0f} ns" for s in far[1:])
    return text


def _lines(lv: dict) -> str:
    line, sector = lv.get("line_bytes"), lv.get("sector_bytes")
    if line is None and sector is None:
        return "-"
    return f"{line or '?'} / {sector or '?'} B"


def levels_rows(result: dict) -> list[list[str]]:
    rows = []
    for lv in result["levels"]:
        rows.append([lv["name"], SCOPE_WORDS.get(lv.get("scope"), lv.get("scope", "")),
                     _capacity_cell(lv), lv.get("fall_shape") or "-", fmt_gbs(lv["bandwidth_gbs"]),
                     _share(lv), _peak(lv), _latency(lv), _lines(lv), _repeat(lv),
                     f"{lv.get('confidence', 0):.2f}", fmt_bytes(lv.get("api_bytes"))])
    return rows


LEVEL_HEADER = ["level", "scope", "capacity (interval)", "fall", "plateau bandwidth", "share of ceiling",
                "peak (tuned launch)", "latency", "line / sector", "repeatability", "confidence", "API size"]


def summary_table(result: dict) -> str:
    """The short table printed on stdout."""
    rows = levels_rows(result)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(LEVEL_HEADER)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    dev = result["device"]
    out = [f"{dev['name']}: {len(result['levels'])} levels from {result['measurements']} measurements "
           f"in {result['elapsed_s']:.1f} s", line(LEVEL_HEADER)]
    out += [line(r) for r in rows]
    out += carveout_report.terminal(result)
    return "\n".join(out)


def render_report(result: dict, *, plot_name: str = "bandwidth.png") -> str:
    dev = result["device"]
    method = result.get("method", {})
    sim = " (SIMULATED: figures from a model, not hardware)" if dev.get("simulated") else ""
    lines = [f"# Cache hierarchy of {dev['name']}{sim}", ""]
    facts = [["vendor / arch", f"{dev.get('vendor')} {dev.get('arch', '')}".strip()],
             ["SMs/CUs", str(dev.get("compute_units"))],
             ["XCDs", str(dev.get("xcds", 1))],
             ["L2 reported by the API", fmt_bytes(dev.get("l2_bytes_reported"))],
             ["max SM clock", f"{dev['sm_clock_max_mhz']:.0f} MHz" if dev.get("sm_clock_max_mhz") else "unknown"],
             ["memory", f"{dev.get('memory_bus_width_bits') or '?'}-bit at "
                        f"{dev.get('mem_clock_max_mhz') or '?'} MHz"],
             ["driver / torch / triton", f"{dev.get('driver') or '-'} / {dev.get('torch') or '-'} / {dev.get('triton') or '-'}"]]
    carveout = carveout_report.device_line(result)
    if carveout:
        facts.append(["shared memory carved out of the L1", carveout])
    clocks = method.get("sm_clock_seen_mhz")
    if clocks:
        facts.append(["SM clock seen during the run", f"{min(clocks):.0f} to {max(clocks):.0f} MHz"])
    lines += ["## Device", "", markdown_table(["fact", "value"], facts), ""]
    lines += ["## Method", ""]
    sweeps = method.get("sweeps", {})
    if sweeps:
        for name, sw in sweeps.items():
            lines.append(f"- `{name}` sweep: {sw.get('programs')} programs, block {sw.get('block_size')}, "
                         f"{sw.get('num_warps')} warps, `{sw.get('load_flavour')}` loads, "
                         f"{sw.get('measurements', '?')} measurements, {sw.get('seconds', 0):.1f} s.")
    else:
        lines.append("- Analysis of recorded measurements (`detect-caches analyze`).")
    if method.get("timing") == "device":
        how = ("bytes of the timed passes over the longest program's timed phase, read from an "
               "in-kernel clock after untimed warm-up passes and a grid barrier (one wave). Where "
               "programs finish unevenly, as in the partial hits just past a cache's capacity, the "
               "longest program reads lower and noisier than the event regression (H200: 1.34x the "
               "median program at 224 KiB per SM, against 1.01x on the L1 plateau), so a cliff may "
               "stay unresolved; the default event timing resolves it")
    else:
        how = "the slope of kernel time against load iterations (CUDA events)"
    lines.append(f"- {result['measurements']} measurements, {result['elapsed_s']:.1f} s in all; each "
                 f"bandwidth is {how}; plateaus and knees from ruptures changepoints on log bandwidth.")
    lat = method.get("latency")
    if lat:
        lines.append(f"- Latency: {lat.get('measurements', 0)} chase points (chains up to "
                     f"{fmt_bytes(lat.get('max_chain_bytes'))}) and {lat.get('probe_measurements', 0)} sector and "
                     f"line probes, {lat.get('seconds', 0) + lat.get('probe_seconds', 0):.1f} s.")
    peaks = method.get("peak_probes")
    if peaks:
        lines.append(f"- Peak probes: {peaks.get('measurements', 0)} measurements of other launch "
                     "configurations inside each plateau; the best is the `peak` column:")
        lines += [f"  - {lv['name']}: {lv['peak_launch']}" for lv in result["levels"] if lv.get("peak_launch")]
    cv = method.get("carveouts")
    if cv:
        lines.append(f"- Carveouts: the private sweep again under each carveout asked for but the default's, "
                     f"inside a window around the L1 it should leave, refined as the run's L1 is, and one chase "
                     f"inside each L1: {cv.get('measurements', 0)} measurements, {cv.get('seconds', 0):.1f} s.")
    lines += ["", "## Levels", "", markdown_table(LEVEL_HEADER, levels_rows(result)), "",
              CAPACITY_TEXT, ""]
    lines += carveout_report.section(result)
    notes = [(lv["name"], lv.get("notes")) for lv in result["levels"] if lv.get("notes")]
    if notes:
        lines += ["## Notes", ""]
        lines += [f"- **{name}**: {text}" for name, text in notes]
        lines.append("")
    doubts = result.get("doubts") or []
    if doubts:
        lines += ["## Doubts: this result may be incomplete", ""]
        lines += [f"- {d}" for d in doubts]
        lines += ["", "The command line exits 2 on a result with doubts unless `--accept-incomplete` is given.", ""]
    lines += ["## Warnings", ""]
    lines += [f"- {w}" for w in result.get("warnings", [])] or ["- none"]
    lines += ["", "## Plot", "", f"![bandwidth against working set]({plot_name})", ""]
    return "\n".join(lines)
