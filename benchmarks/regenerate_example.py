"""Regenerate a committed run's report (examples/h200 by default) with this version's analysis and
reports, from its own measurements.csv: `python benchmarks/regenerate_example.py [FOLDER]`.

`analyze` alone would rewrite what only the run itself knew: its time (`created`), how long it
took (`elapsed_s`), how many measurements it took (`measurements`: analyze counts the rows that
hold a figure), how it measured (`method`: sweeps, latency, peak probes, timings) and the warnings
of the session (a poor fit kept, a busy GPU). Those are kept from the committed result.json; the
levels, the device's carveout and the analysis's own warnings are this version's, and the doubts
are judged again on the kept method. result.json, report.md, report.html and bandwidth.png are
replaced; measurements.csv is left as it is."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEPT = ("created", "elapsed_s", "measurements", "method")


def regenerate(folder: Path) -> dict:
    from detect_caches.pipeline.api import analyze
    from detect_caches.pipeline.outputs import write_result_files
    from detect_caches.reports.doubt import find_doubts
    old = json.loads((folder / "result.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        new = analyze(folder / "measurements.csv", device=folder / "result.json", out=Path(tmp) / "again")
    data = dict(new.data)
    for key in KEPT:
        if key in old:
            data[key] = old[key]
    data["warnings"] = data["warnings"] + [w for w in old.get("warnings", []) if w not in data["warnings"]]
    data["doubts"] = find_doubts(data)
    write_result_files(folder, data, new.detection, data["device"]["name"])
    return data


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "h200"
    result = regenerate(target)
    from detect_caches.reports.summary import answer_line
    print(answer_line(result))
