"""Where measuring a fall again makes its capacity repeat: the device falls whose points' noise
alone would move the capacity more than PRECISE between runs, with every size their fit reads (read
PRECISION_ROUNDS more times by pipeline.sweep_detect, then analysed once)."""
from __future__ import annotations

from detect_caches.detector.levels import Detection

PRECISE = 0.007   # a capacity's noise repeatability (1 sigma, ln C) asked for: two runs then read
                  # it within 2% of each other 19 times in 20 (issue 28's spread target)


def noisy_falls(detection: Detection, *, above: float = PRECISE) -> list[tuple[str, list[float]]]:
    """(sweep, the sizes of the fall's fit window, in that sweep's x units) for every fall whose
    noise repeatability is still above ``above``: the whole window, plateau ends included (on a
    low-ratio fall the plateau speeds move its capacity as much as the points inside it)."""
    out = []
    # device falls only: a per-SM/CU fall's doubt is its knee's to settle (detector.joint), and
    # measured again it spent the run's budget for nothing (SIMULATED, the built-in mi300x's
    # L1, noise-limited, read 11-12% off on two seeds of 8, mi210's L3 lost on one)
    an = detection.sweeps.get("shared")
    for st in an.steps if an is not None else ():
        e = st.estimate.alone or st.estimate     # the fall's own doubt, not a knee's (detector.joint)
        if e.noise_repeatability <= above:
            continue
        sizes = sorted({float(s) for s in an.curve.size_bytes[an.step_points(st.upper)]})
        if sizes:
            out.append(("shared", sizes))
    return out
