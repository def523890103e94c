"""Where measuring a fall again makes its capacity repeat: the falls whose points' noise alone
would move the capacity more than PRECISE between runs, with the sizes that place it (read
PRECISION_ROUNDS more times by pipeline.sweep_detect, the device falls first, then analysed once).
A per-SM/CU fall gets what the device falls leave of the budget: read again whole it took their
points (the built-in mi300x's L1 11-12% off on two seeds of 8, mi210's L3 lost on one); its plateau
and its start alone, after them, read the mi300x's L1 within 3% on 31 of 40 seeds against 26,
rms 2.7% against 4.0% (SIMULATED)."""
from __future__ import annotations

from detect_caches.detector.levels import Detection

PRECISE = 0.007   # a capacity's noise repeatability (1 sigma, ln C) asked for: two runs then read
                  # it within 2% of each other 19 times in 20 (issue 28's spread target)
PLATEAU_OCTAVES = 2.0   # a per-SM/CU fall: its plateau read again this far below C ...
PAST_C = 1.15           # ... and its fall up to this factor past C


def noisy_falls(detection: Detection, *, sweep: str = "shared", above: float = PRECISE) -> list[tuple[str, list[float]]]:
    """(sweep, sizes in its x units) for every fall of ``sweep`` whose noise repeatability is
    still above ``above``: a device fall's whole fit window, plateau ends included (on a
    low-ratio fall the plateau speeds move its capacity as much as the points inside it); a
    per-SM/CU fall's upper plateau (up to PLATEAU_OCTAVES before C) and its fall to PAST_C x C:
    where a pseudo-LRU decline starts, against the speed it starts from."""
    an, out = detection.sweeps.get(sweep), []
    for st in an.steps if an is not None else ():
        # a device fall's own doubt, not a knee's (detector.joint); a per-SM/CU fall's with its knee's
        e = (st.estimate.alone or st.estimate) if sweep == "shared" else st.estimate
        if e.noise_repeatability <= above:
            continue
        if sweep == "shared":
            xs = an.curve.size_bytes[an.step_points(st.upper)]
        else:
            start = max(an.plateaus[st.upper].size_lo_bytes, e.capacity_bytes / 2 ** PLATEAU_OCTAVES)
            xs = [x for x in an.curve.size_bytes if start <= x <= e.capacity_bytes * PAST_C]
        sizes = sorted({float(x) for x in xs})
        if sizes:
            out.append((sweep, sizes))
    return out
