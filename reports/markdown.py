"""report.md and the terminal summary."""
from __future__ import annotations

from detect_caches.reports import carveout_report, glossary
from detect_caches.reports.fmt import fmt_bytes, markdown_table
from detect_caches.reports.details import DETAIL_HEADER, detail_rows, documented_sentences
from detect_caches.reports.notes import sentence, sentences
from detect_caches.reports.summary import NARROW_HEADER, answer_line, narrow_rows, run_line, terminal_summary


def summary_table(result: dict) -> str:
    """What the terminal shows: the answer line first, then the narrow table (and carveouts)."""
    return "\n".join(terminal_summary(result) + carveout_report.terminal(result))


def device_rows(result: dict) -> list[list[str]]:
    """The device table: what the hardware is and what it ran under."""
    dev = result["device"]
    method = result.get("method", {})
    units = {"nvidia": "SMs", "amd": "CUs"}.get(dev.get("vendor"), "SMs/CUs")
    facts = [["vendor / arch", f"{dev.get('vendor')} {dev.get('arch', '')}".strip()],
             [units, str(dev.get("compute_units"))],
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
    return facts


def method_lines(result: dict) -> list[str]:
    """How the figures were measured, one sentence an item."""
    method = result.get("method", {})
    lines = []
    for name, sw in method.get("sweeps", {}).items():
        lines.append(f"The `{name}` sweep: {sw.get('programs')} programs, block {sw.get('block_size')}, "
                     f"{sw.get('num_warps')} warps, `{sw.get('load_flavour')}` loads, "
                     f"{sw.get('measurements', '?')} measurements, {sw.get('seconds', 0):.1f} s.")
    if not method.get("sweeps"):
        lines.append("An analysis of recorded measurements (`detect-caches analyze`).")
    if method.get("timing") == "device":
        how = ("the bytes of the timed passes over the longest program's timed phase, read from an "
               "in-kernel clock after untimed warm-up passes and a grid barrier (one wave). Where "
               "programs finish unevenly, as in the partial hits just past a cache's capacity, the "
               "longest program reads lower and noisier than the event regression, so a cliff may "
               "stay unresolved; the default event timing resolves it")
    else:
        how = "the slope of kernel time against load iterations (CUDA events)"
    lines.append(f"{result['measurements']} measurements, {result['elapsed_s']:.1f} s in all. Each bandwidth is "
                 f"{how}. Plateaus and falls come from changepoints on log bandwidth, sizes from hit-rate "
                 f"models fitted to each fall.")
    lat = method.get("latency")
    if lat:
        lines.append(f"Latency: {lat.get('measurements', 0)} chase points (chains up to "
                     f"{fmt_bytes(lat.get('max_chain_bytes'))}) and {lat.get('probe_measurements', 0)} sector "
                     f"and line probes, {lat.get('seconds', 0) + lat.get('probe_seconds', 0):.1f} s.")
    peaks = method.get("peak_probes")
    if peaks:
        lines.append(f"Peak probes: {peaks.get('measurements', 0)} measurements of other launch configurations "
                     f"inside each plateau; the best is the tuned peak.")
        lines += [f"  - {lv['name']}: {lv['peak_launch']}" for lv in result["levels"] if lv.get("peak_launch")]
    cv = method.get("carveouts")
    if cv:
        lines.append(f"Carveouts: the private sweep again under each carveout asked for but the default's, "
                     f"inside a window around the L1 it should leave, and one chase inside each L1: "
                     f"{cv.get('measurements', 0)} measurements, {cv.get('seconds', 0):.1f} s.")
    return lines


def note_items(result: dict) -> list[tuple[str, list[str]]]:
    """(level, its notes as sentences) for each level with notes."""
    return [(lv["name"], sentences(lv.get("notes"))) for lv in result["levels"] if lv.get("notes")]


def render_report(result: dict, *, plot_name: str = "bandwidth.png") -> str:
    dev = result["device"]
    sim = " (SIMULATED: figures from a model, not hardware)" if dev.get("simulated") else ""
    lines = [f"# Cache hierarchy of {dev['name']}{sim}", "", f"**{answer_line(result)}**", "",
             run_line(result) + ".", ""]
    doubts = result.get("doubts") or []
    if doubts:
        lines += [f"**This result may be incomplete** ({len(doubts)} doubt(s), below).", ""]
    lines += [markdown_table(NARROW_HEADER, narrow_rows(result)), ""]
    lines += documented_sentences(result) + ([""] if documented_sentences(result) else [])
    lines += [f"![bandwidth against working set]({plot_name})", ""]
    if doubts:
        lines += ["## Doubts: this result may be incomplete", ""]
        lines += [f"- {sentence(d)}" for d in doubts]
        lines += ["", "The command line exits 2 on a result with doubts unless `--accept-incomplete` is given.", ""]
    notes = note_items(result)
    if notes:
        lines += ["## Notes", ""]
        for name, said in notes:
            lines += [f"**{name}**", ""] + [f"- {text}" for text in said] + [""]
    lines += ["## Warnings", ""]
    lines += [f"- {sentence(w)}" for w in result.get("warnings", [])] or ["- None."]
    lines += ["", "## Details", "", markdown_table(DETAIL_HEADER, detail_rows(result)), ""]
    lines += carveout_report.section(result)
    lines += ["## Device", "", markdown_table(["fact", "value"], device_rows(result)), ""]
    lines += ["## Method", ""] + [m if m.startswith("  -") else f"- {m}" for m in method_lines(result)] + [""]
    lines += glossary.markdown(result)
    return "\n".join(lines)
