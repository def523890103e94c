"""The history of GPUs across driver and firmware updates: every result found under the given
files and folders, grouped by device model, each GPU's runs in time order, each run judged
against that GPU's previous one with `compare`'s rule. Exit 1 (for CI) when the newest run of any
GPU drifts from its previous run."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from measure.errors import DetectCachesError, InputError
from reports.compare import compare_results, environment_changes
from reports.fleet import created_epoch, gpu_label
from reports.fmt import fmt_bytes, fmt_gbs, level_key, markdown_table
from reports.result_json import read_result

MAX_FILES = 20000
MAX_DEPTH = 16


def find_results(paths: list[Path], skipped: list[str]) -> list[tuple[Path, dict]]:
    """Every readable result.json under ``paths`` (files, or folders searched recursively without
    following links); files that are not results are named in ``skipped``."""
    found: list[tuple[Path, dict]] = []
    for path in paths:
        if path.is_file():
            found.append((path, read_result(path)))     # given by name: it must be a result
            continue
        if not path.is_dir():
            if path.exists():
                raise InputError(f"{path} is not a regular file or a folder (a pipe, device or socket); "
                                 f"give result.json files or folders of them")
            raise InputError(f"{path}: no such file or folder")
        base = len(path.parts)
        for root, dirs, files in os.walk(path, followlinks=False):
            if len(Path(root).parts) - base >= MAX_DEPTH:
                dirs[:] = []
            dirs.sort()
            if "result.json" in files:
                p = Path(root) / "result.json"
                try:
                    found.append((p, read_result(p)))
                except DetectCachesError as exc:
                    skipped.append(f"{p}: {exc}")
                if len(found) > MAX_FILES:
                    raise InputError(f"more than {MAX_FILES} results under {path}; give a narrower folder")
    if not found:
        raise InputError("no result.json found in " + ", ".join(map(str, paths)))
    return found


def _when(path: Path, res: dict) -> float:
    """Time order of results: their creation time (the file's change time when not recorded)."""
    when = created_epoch(res)
    if not when:
        try:
            when = path.stat().st_mtime
        except OSError:
            pass
    return when


@dataclass
class Run:
    path: Path
    result: dict
    verdict: str = "first run"
    drift: bool = False
    changes: list[str] = field(default_factory=list)


@dataclass
class History:
    models: dict[str, list[Run]]          # model -> runs in time order
    skipped: list[str] = field(default_factory=list)

    @property
    def drift(self) -> bool:
        """The newest run of some GPU drifts from that GPU's previous run."""
        newest: dict[str, Run] = {}
        for runs in self.models.values():
            for run in runs:
                newest[gpu_label(run.result)] = run
        return any(run.drift for run in newest.values())

    def markdown(self) -> str:
        lines = []
        for model, runs in self.models.items():
            keys = []
            for run in runs:
                for lv in run.result["levels"]:
                    if level_key(lv) not in keys:
                        keys.append(level_key(lv))
            rows = []
            for run in runs:
                dev, lv = run.result["device"], {level_key(x): x for x in run.result["levels"]}
                env = dev.get("environment") or {}
                row = [str(run.result.get("created") or "?")[:19], str(dev.get("uuid") or gpu_label(run.result))[:24],
                       str(env.get("driver") or dev.get("driver") or "-")]
                row += ["-" if k not in lv else f"{fmt_bytes(lv[k].get('capacity_bytes'))} / {fmt_gbs(lv[k]['bandwidth_gbs'])}"
                        for k in keys]
                rows.append(row + [run.verdict])
            lines += [f"# History: {model} ({len(runs)} run(s), {len({gpu_label(r.result) for r in runs})} GPU(s))", "",
                      markdown_table(["date", "GPU", "driver"] + [f"{k} capacity / bandwidth" for k in keys] + ["against the GPU's previous run"],
                                     rows), ""]
        verdict = ("**drift**: the newest run of a GPU drifts from its previous run" if self.drift
                   else "no drift in the newest runs")
        lines.append(f"Result: {verdict}.")
        if self.skipped:
            lines += ["", f"Skipped {len(self.skipped)} file(s) that are not readable results:"]
            lines += [f"- {s}" for s in self.skipped[:20]]
        return "\n".join(lines) + "\n"


def build_history(paths: list[Path], *, capacity_tol: float, bandwidth_tol: float) -> History:
    skipped: list[str] = []
    found = find_results(paths, skipped)
    seen_paths = set()
    models: dict[str, list[Run]] = {}
    for path, res in sorted(found, key=lambda pr: (_when(*pr), str(pr[0]))):
        real = path.resolve()
        if real in seen_paths:
            continue
        seen_paths.add(real)
        models.setdefault(res["device"].get("name", "?"), []).append(Run(path, res))
    for runs in models.values():
        previous: dict[str, Run] = {}
        for run in runs:
            label = gpu_label(run.result)
            before = previous.get(label)
            if before is not None:
                cmp = compare_results(before.result, run.result, capacity_tol=capacity_tol, bandwidth_tol=bandwidth_tol)
                run.drift, run.changes = cmp.drift, environment_changes(before.result, run.result)
                drifted = [d + ": drift" for d in cmp.drifted] if cmp.drift else []
                said = "; ".join(run.changes + cmp.explained + drifted)
                run.verdict = ("DRIFT: " if cmp.drift else "ok") + (f" ({said})" if said else "")
            previous[label] = run
    return History(models, skipped)


def latest_before(paths: list[Path], facts_uuid: str, model: str) -> tuple[Path, dict] | None:
    """The newest earlier result of the same GPU (by UUID), else of the same model, under ``paths``."""
    found = find_results(paths, [])
    same_model = [(p, r) for p, r in found if r["device"].get("name") == model]
    same_gpu = [(p, r) for p, r in same_model if facts_uuid and r["device"].get("uuid") == facts_uuid]
    pool = same_gpu or same_model
    return max(pool, key=lambda pr: (_when(*pr), str(pr[0]))) if pool else None


def write_history_plot(path: Path, history: History) -> None:
    """history.png: one panel per level, each GPU's capacity over its runs."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from reports.atomic import write_bytes_atomic
    import io
    keys = []
    for runs in history.models.values():
        for run in runs:
            for lv in run.result["levels"]:
                if level_key(lv) not in keys:
                    keys.append(level_key(lv))
    fig, axes = plt.subplots(len(keys), 1, figsize=(9, 2.6 * len(keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        for runs in history.models.values():
            by_gpu: dict[str, list] = {}
            for i, run in enumerate(runs):
                lv = next((x for x in run.result["levels"] if level_key(x) == key), None)
                if lv is not None:
                    value = lv.get("capacity_bytes") or lv["bandwidth_gbs"]
                    by_gpu.setdefault(gpu_label(run.result), []).append((i, value, run.drift))
            for label, pts in by_gpu.items():
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, lw=1, label=label[:16])
                ax.plot([p[0] for p in pts if p[2]], [p[1] for p in pts if p[2]], "x", color="#d62728", ms=8)
        ax.set_title(key, fontsize=9)
        ax.set_ylabel("capacity (B)" if "HBM" not in key and "DRAM" not in key else "bandwidth (GB/s)", fontsize=8)
        ax.grid(True, color="#dddddd", lw=0.5)
    axes[-1, 0].set_xlabel("run (time order)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())
