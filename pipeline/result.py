"""What a run or an analysis gives the Python API: result.json's content, its measurements,
its detection and where its files are."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(repr=False)
class Result:
    """What a run or an analysis produced: ``data`` is result.json's content. In a notebook it
    shows its answer and levels table; ``levels_frame`` has the figures as numbers and ``plot()``
    the figure of bandwidth.png."""

    data: dict
    records: list = field(default_factory=list, repr=False)
    detection: object = field(default=None, repr=False)
    out: Path | None = None

    def __getitem__(self, key):
        return self.data[key]

    @property
    def levels(self) -> list[dict]:
        return self.data["levels"]

    @property
    def levels_frame(self):
        """The levels as a pandas DataFrame indexed by level name: sizes in bytes, bandwidths in
        GB/s, latencies in ns, repeatabilities and confidence as fractions (NaN where unknown)."""
        from detect_caches.reports.frames import levels_frame
        return levels_frame(self.data)

    def plot(self, title: str | None = None):
        """bandwidth.png's figure (a matplotlib Figure on its own Agg canvas: pyplot and your
        backend are left alone; a notebook shows it, ``fig.savefig`` writes it)."""
        from detect_caches.errors import InputError
        if self.detection is None:
            raise InputError("this Result carries no analysis to plot (analyze() its measurements first)")
        from detect_caches.reports.plot import build_figure
        from detect_caches.reports.figure import RENDER_LOCK
        dev = self.device
        with RENDER_LOCK:
            return build_figure(self.detection, title or str(dev.get("name", "")), vendor=dev.get("vendor"))

    def __repr__(self) -> str:
        from detect_caches.reports.summary import answer_line
        where = f", out={str(self.out)!r}" if self.out else ""
        doubts = f", {len(self.doubts)} doubt(s)" if self.doubts else ""
        return (f"<Result {self.device.get('name', '?')}: {answer_line(self.data)}; "
                f"{self.data.get('measurements', 0)} measurements{doubts}{where}>")

    def _repr_html_(self) -> str:
        from detect_caches.reports.html import inline, table
        from detect_caches.reports.summary import NARROW_HEADER, answer_line, narrow_rows, run_line
        doubts = "".join(f"<li>{inline(d)}</li>" for d in self.doubts)
        return (f"<p><strong>{inline(answer_line(self.data))}</strong><br>{inline(run_line(self.data))}</p>"
                + table(NARROW_HEADER, narrow_rows(self.data))
                + (f"<p>Doubts:</p><ul>{doubts}</ul>" if doubts else ""))

    @property
    def device(self) -> dict:
        return self.data["device"]

    @property
    def warnings(self) -> list[str]:
        return self.data.get("warnings", [])

    @property
    def doubts(self) -> list[str]:
        """Why the result may be incomplete (reports.doubt); the command line exits 2 on them."""
        return self.data.get("doubts", [])

    def level(self, name: str) -> dict:
        found = [lv for lv in self.levels if lv["name"] == name]
        if not found:
            raise KeyError(f"no level {name!r}; the levels are {', '.join(lv['name'] for lv in self.levels)}")
        return found[0]

    @property
    def measurements(self):
        """Every measurement as a pandas DataFrame, one row per measured point."""
        import pandas as pd
        from detect_caches.records import COLUMNS
        return pd.DataFrame([dataclasses.asdict(r) for r in self.records], columns=COLUMNS)

    def to_json(self) -> str:
        from detect_caches.reports.result_json import dumps
        return dumps(self.data)
