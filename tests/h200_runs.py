"""Recorded runs of real H200s that the tests read (their measurements.csv, result.json and
sector.json), kept as one archive, tests/data/h200-runs.tar.xz, and unpacked once per test
session into a temporary folder: ``H200 / "2026-11-30" / "final" / "bench" / "run1"`` and so on.
The 2026-11 calls these runs come from, and every other record of them, are in
records/gpu-calls-2026-11.tar.xz (BENCHMARKS.md says what each call measured); of the 2026-12-05
calls only the runs' measurements and results are kept here: four on card GPU-937fc836 (after/),
four on GPU-9916a163 with the fit workers (final/), and one run of an H100 80GB HBM3 the device
tool lent in place of an H200 that day (h100-card/); of the 2026-12-06 call, the three cold runs and
the --no-latency one of another H100 80GB HBM3, GPU-9135e92b (2026-12-06/h100-card/), and the same
of a third, GPU-01354bba, measured with the cliff's edge kept before partial hits (2026-12-06/h100-card-2/),
and of a fourth, GPU-e010780b, measured with the mended rule (2026-12-06/h100-card-3/); of a later
call that day, the same of a fifth, GPU-5b48a0a3, measured at a1328d6 (2026-12-06/h100-card-4/), and of
an H200, GPU-52f188f7, at 02352bf (2026-12-06/h200-card/: the same detector), and of a sixth H100,
GPU-d6d913f7, at b695480 (2026-12-06/h100-card-5/: the falls read less the tail above), and of a
seventh, GPU-e1c9adbb, at ac364c0 (2026-12-06/h100-card-6/); and of an eighth and a ninth, GPU-36757349
and GPU-306037df, at c0258d3 (2026-12-06/h100-card-7/, h100-card-8/: the chase's recheck on); and of a
tenth, GPU-7ebe6f12, at 842a8ed (2026-12-06/h100-card-9/: the chase's knee sharing the L1's capacity),
and of an eleventh, GPU-05e47f12, at b4c36ff (2026-12-06/h100-card-10/), and a twelfth, GPU-3cb57d0d,
at f449925 (2026-12-06/h100-card-11/), and a thirteenth, GPU-e7f83e9a, at 3fbc47c
(2026-12-06/h100-card-12/), and a fourteenth, GPU-b192d0f2, at 6cbab88 (2026-12-06/h100-card-13/); and of a fourth H200,
GPU-2e4d2e3a, at 1153eea (2026-12-06/h200-card-2/); and of 2026-12-07, the three cold runs of a fifteenth
H100, GPU-586f0232, and of a sixteenth, GPU-248e81d1, at 2846942, the first measured with the precision
readings (2026-12-07/h100-card-14/, h100-card-15/); and of the twelfth session, the same of a
seventeenth, GPU-d150ccd1, and an eighteenth, GPU-2874264e, at 7049b62 (2026-12-07/h100-card-16/,
h100-card-17/: a per-SM/CU fall's start read again where noise keeps it from repeating); and of the
thirteenth, the same of five more H100s lent for an H200: GPU-6fb009b7 and GPU-f56a3f26 at 109b88a,
GPU-061ff5c7 at e2bc44a (the budget 800), GPU-b2b5d858 at b97b935 and GPU-5fa85614 at bba06db
(2026-12-07/h100-card-18/ to h100-card-22/); and of the fourteenth, GPU-6c6a7b60 at e0a041b
(2026-12-07/h100-card-23/: its capacities to the byte, as since, but its intervals too, which
since 86a8573 reach out to the sweep's size grid again); and of the fifteenth, GPU-79c5ceb7 at d344b23
(2026-12-07/h100-card-24/); and of the sixteenth, GPU-45d8773c at 4692854, GPU-5d5ddbce
at c8b9c43 and GPU-e5cfd6b0 at 0fb15fc (2026-12-07/h100-card-25/ to h100-card-27/); and of the
eighteenth, GPU-e6733a96 at 94514ce (2026-12-07/h100-card-28/)."""
from __future__ import annotations

import atexit
import shutil
import tarfile
import tempfile
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parent / "data" / "h200-runs.tar.xz"


def _unpack() -> Path:
    root = Path(tempfile.mkdtemp(prefix="detect-caches-h200-runs-"))
    atexit.register(shutil.rmtree, root, True)
    with tarfile.open(ARCHIVE) as tar:
        try:
            tar.extractall(root, filter="data")
        except TypeError:         # a Python without extraction filters (3.10 before 3.10.12)
            tar.extractall(root)
    return root / "h200"


H200 = _unpack()
