"""What a run or an analysis gives the Python API: result.json's content, its measurements,
its detection and where its files are."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Result:
    """What a run or an analysis produced: ``data`` is result.json's content."""

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
