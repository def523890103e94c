"""The data model that flows out of `measure`: one record per measured point, and its CSV file.

Torch-free on purpose: `detector`, `reports` and `detect-caches analyze` read these records on
machines without a GPU stack.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, TextIO

SWEEPS = ("private", "shared", "chase")
METRICS = ("bandwidth", "latency")
PHASES = ("calibrate", "coarse", "refine", "check", "peak", "sector", "line")
# flags that make a point unusable: beyond a physical ceiling, or in-kernel timing whose grid
# barrier timed out (the programs did not all run in one wave)
REJECTED_FLAGS = frozenset({"above_ceiling", "not_one_wave"})


@dataclass
class Measurement:
    """One kernel measurement: a working set, the bandwidth the regression fit gave, and how.

    ``working_set_bytes`` is per SM/CU for the ``private`` sweep, the aggregate over all
    programs for the ``shared`` sweep, and the chain's bytes for the one-program ``chase``.
    ``bandwidth_gbs`` is decimal GB/s (1e9 B/s).
    """

    sweep: str
    working_set_bytes: int
    bandwidth_gbs: float
    stream_bytes: int = 0          # bytes each program streams per pass
    programs: int = 0
    rows: int = 0                  # distinct rows streamed (programs, or SMs when rows follow SM ids)
    block_size: int = 0
    num_warps: int = 0
    load_flavour: str = ""
    load_iters: int = 0            # the largest load_iters of the regression
    slope_ms: float = math.nan     # ms per pass over the working set
    intercept_ms: float = math.nan
    r2: float = math.nan
    phase: str = "coarse"
    timing: str = "events"         # "events" (load-iteration regression) or "device" (in-kernel clock)
    flags: str = ""                # ";"-joined: poor_r2, above_ceiling, remeasured, noisy, not_one_wave, rechecked
    sm_clock_mhz: float = math.nan
    t_s: float = 0.0               # seconds since the start of the run
    metric: str = "bandwidth"      # "latency": a pointer chase (sweep "chase"); bandwidth_gbs is then
                                   # slot bytes per hop time, a rate that mixes like bandwidth
    latency_ns: float = math.nan   # ns per dependent load (chase)
    latency_cycles: float = math.nan   # SM/CU cycles per dependent load (chase, in-kernel clock)
    stride_bytes: int = 0          # chase: bytes from one chain element's slot to the next
    order: str = ""                # chase: "random" (one cycle) or "sequential" (address order)
    target: str = ""               # probes: the level a sector or line probe is for
    carveout_kib: float = math.nan  # shared memory the launch asked to carve out of the L1 (KiB);
                                    # empty: the driver's own choice (measure.carveout)

    @property
    def flag_set(self) -> set[str]:
        return {f for f in self.flags.split(";") if f}

    def with_flag(self, flag: str) -> "Measurement":
        return dataclasses.replace(self, flags=";".join(sorted(self.flag_set | {flag})))


COLUMNS = [f.name for f in dataclasses.fields(Measurement)]
REQUIRED_COLUMNS = ("sweep", "working_set_bytes", "bandwidth_gbs")


class MeasurementLog:
    """Appends measurements to a CSV file as they are taken, so an interrupted run keeps them."""

    def __init__(self, path: Path | None):
        self.path = path
        self.records: list[Measurement] = []
        self._fh: TextIO | None = None
        self._writer = None
        if path is not None:
            self._fh = open(path, "x", newline="")
            self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS)
            self._writer.writeheader()
            self._fh.flush()

    def append(self, record: Measurement) -> None:
        self.records.append(record)
        if self._writer is not None:
            self._writer.writerow(_row(record))
            self._fh.flush()

    def extend(self, records: Iterable[Measurement]) -> None:
        for r in records:
            self.append(r)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "MeasurementLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _row(record: Measurement) -> dict:
    row = dataclasses.asdict(record)
    for k, v in row.items():
        if isinstance(v, float):   # numpy floats too: written as plain Python float reprs
            row[k] = "" if math.isnan(v) else repr(float(v))
        elif isinstance(v, int) and not isinstance(v, bool):
            row[k] = str(int(v))
    return row


def write_measurements(path: Path, records: Iterable[Measurement]) -> None:
    """Write a complete measurements CSV (used by tests and conversions; not atomic by itself)."""
    with MeasurementLog(path) as log:
        log.extend(records)
