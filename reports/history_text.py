"""history.md: a table per model (one dated row per run, the verdict against the GPU's
reference), the answer, and what was passed over."""
from __future__ import annotations

from detect_caches.reports.fmt import markdown_table
from detect_caches.reports.history import History, level_keys, row_cells
from detect_caches.reports.identity import gpu_label, run_time
from detect_caches.reports.search import show


def history_markdown(history: History) -> str:
    lines = []
    for model, by_gpu in history.models.items():
        runs = sorted((r for rs in by_gpu.values() for r in rs),
                      key=lambda r: (run_time(r.result) is not None, run_time(r.result) or 0.0, str(r.path)))
        keys = level_keys(runs)
        lines += [f"# History: {show(model)} ({len(runs)} run(s), {len(by_gpu)} GPU(s))", "",
                  markdown_table(["date", "GPU", "driver"] + [f"{k} capacity / bandwidth" for k in keys]
                                 + [f"against the reference ({history.reference.text})"],
                                 [row_cells(r, keys) for r in runs]), ""]
    failing = [r for r in history.newest() if r.failed]
    if failing:
        who = "; ".join(f"{show(gpu_label(r.result, r.path))} {r.verdict.removeprefix('DRIFT ')} against its "
                        f"{r.reference}" for r in failing)
        lines.append(f"Result: **drift**: the newest run of {len(failing)} GPU(s) fails against its reference "
                     f"(--fail-on {history.fail_on}): {who}.")
    else:
        lines.append(f"Result: no drift in the newest runs (against each GPU's reference: {history.reference.text}).")
    if history.skipped:
        lines += ["", f"**Incomplete**: {len(history.skipped)} result.json file(s) could not be read, so the check "
                      f"cannot vouch for those GPUs:"]
        lines += [f"- {s}" for s in history.skipped[:20]]
    if history.notes:
        lines += [""] + [f"- {n}" for n in history.notes]
    return "\n".join(lines) + "\n"
