"""history.md: a table per model (one dated row per run: each level's size, bandwidth and
latency, the verdict against the GPU's reference), the answer naming the GPUs, and what was
passed over."""
from __future__ import annotations

from datetime import datetime

from detect_caches.reports.fmt import fmt_bytes, level_key, markdown_table
from detect_caches.reports.gpu_names import short_names
from detect_caches.reports.history import History, Run, level_keys
from detect_caches.reports.identity import run_time
from detect_caches.reports.search import show
from detect_caches.reports.summary import fmt_bw, fmt_latency, scope_words

NAMED = 8     # GPUs the answer names; more are counted


def when(run: Run) -> str:
    """The run's own time as stamped (its offset left out), or "undated" (schema 1)."""
    stamp = str(run.result.get("created") or "")
    try:
        return datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return "undated"


def _cell(lv: dict | None) -> str:
    if lv is None:
        return "absent"
    parts = [fmt_bytes(lv["capacity_bytes"])] if lv.get("capacity_bytes") else []
    parts.append(fmt_bw(lv.get("bandwidth_gbs")))
    if lv.get("latency_ns") is not None:
        parts.append(fmt_latency(lv))
    return ", ".join(parts)


def _heading(key: str, vendor: str | None) -> str:
    name, _, scope = key.partition(" (")
    words = scope_words(scope.rstrip(")"), vendor)
    return name if words == "device" else f"{name} {words}"


def row_cells(run: Run, keys: list[str], names: dict[str, str]) -> list[str]:
    from detect_caches.reports.identity import gpu_label
    dev = run.result["device"]
    env = dev.get("environment") or {}
    lv = {level_key(x): x for x in run.result["levels"]}
    label = gpu_label(run.result, run.path)
    return ([when(run), show(names.get(label, label)), show(env.get("driver") or dev.get("driver") or "-")]
            + [_cell(lv.get(k)) for k in keys] + [run.verdict])


def _names(runs: list[Run]) -> dict[str, str]:
    return short_names([(r.result, r.path) for r in runs])


def _listed(names: list[str]) -> str:
    shown = ", ".join(show(n) for n in names[:NAMED])
    return shown + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


def history_markdown(history: History) -> str:
    lines = []
    everyone = [r for by_gpu in history.models.values() for rs in by_gpu.values() for r in rs]
    names = _names(everyone)
    for model, by_gpu in history.models.items():
        runs = sorted((r for rs in by_gpu.values() for r in rs),
                      key=lambda r: (run_time(r.result) is not None, run_time(r.result) or 0.0, str(r.path)))
        keys = level_keys(runs)
        vendor = runs[0].result["device"].get("vendor")
        lines += [f"# History: {show(model)} ({len(runs)} run(s), {len(by_gpu)} GPU(s))", "",
                  "Each level: size (where it has one), bandwidth, latency.", "",
                  markdown_table(["date", "GPU", "driver"] + [_heading(k, vendor) for k in keys]
                                 + [f"against the reference ({history.reference.text})"],
                                 [row_cells(r, keys, names) for r in runs]), ""]
    failing = [r for r in history.newest() if r.failed]
    from detect_caches.reports.identity import gpu_label
    if failing:
        who = "; ".join(f"{show(names.get(gpu_label(r.result, r.path), ''))} {r.verdict.removeprefix('DRIFT ')} "
                        f"against its {r.reference}" for r in failing)
        lines.append(f"Result: **drift**: the newest run of {len(failing)} GPU(s) fails against its reference "
                     f"(--fail-on {history.fail_on}): {who}.")
    else:
        newest = [names.get(gpu_label(r.result, r.path), "") for r in history.newest()]
        models = ", ".join(show(m) for m in history.models)
        lines.append(f"Result: no drift in the newest runs, of {_listed(newest)} ({models}; each against its "
                     f"reference: {history.reference.text}).")
    if history.skipped:
        lines += ["", f"**Incomplete**: {len(history.skipped)} result.json file(s) could not be read, so the check "
                      f"cannot vouch for those GPUs:"]
        lines += [f"- {s}" for s in history.skipped[:20]]
    if history.notes:
        lines += [""] + [f"- {n}" for n in history.notes]
    return "\n".join(lines) + "\n"
