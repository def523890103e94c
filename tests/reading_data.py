"""Runs for the reader-facing tests: a history of one model whose newest run lost 10% of its L2
bandwidth, and a fleet of six GPUs with one outlier (a 10% smaller L2) or one far-off GPU (an
L2 66% faster), from seeded simulator runs (tests/sim_runs)."""
import json
from pathlib import Path

from sim_runs import run_profile

PROFILE = "nv_cliff_tail"
HISTORY_DATES = ("2026-09-01", "2026-09-20", "2026-10-11", "2026-11-02")


def _write(folder: Path, res: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(res))
    return folder / "result.json"


def history_runs(root: Path) -> Path:
    """GPU node1:0: four dated runs, the last after a driver update at 0.9x the L2 bandwidth;
    GPU node1:1: three steady runs."""
    for i, date in enumerate(HISTORY_DATES):
        last = i == len(HISTORY_DATES) - 1
        res = run_profile(PROFILE, 10 + i, level="L2", bandwidth=0.9 if last else 1.0)
        res["created"] = f"{date}T10:00:00+0000"
        res["device"].update(uuid="GPU-1a2b3c4d-0000", host="node1", index=0,
                             environment={"driver": "590.44.01" if last else "580.159.04"})
        _write(root / "g0" / f"run{i}", res)
    for i, date in enumerate(("2026-09-02", "2026-10-12", "2026-11-03")):
        res = run_profile(PROFILE, 30 + i)
        res["created"] = f"{date}T10:00:00+0000"
        res["device"].update(uuid="GPU-9f8e7d6c-0000", host="node1", index=1, environment={"driver": "580.159.04"})
        _write(root / "g1" / f"run{i}", res)
    return root


def fleet_results(root: Path, change: dict, n: int = 6) -> list[dict]:
    """``n`` GPUs of one node, the last with ``change`` (sim_runs.changed's arguments)."""
    results = []
    for i in range(n):
        res = run_profile(PROFILE, 50 + i, **(change if i == n - 1 else {}))
        res["device"].update(uuid=f"GPU-{i:08x}-aaaa", host="node7", index=i)
        path = _write(root / f"gpu{i}", res)
        results.append(dict(res, source_path=str(path)))
    return results
