"""Levels checked against the falls fitted beside them: a fall no model of one level's fall fits,
around a partial plateau that stands out, is two falls, and so is one whose capacity lies past
such a plateau (the fall serves it whole, yet it runs slower); a short level that one fall fits through
at the points' noise is that fall's partial hits. Used by detector.analyze_sweep once its falls
are fitted; ``fit(i)`` fits the fall below plateau ``i`` of the sweep as it then stands."""
from __future__ import annotations

import dataclasses

from detect_caches.detector.levels import SweepAnalysis
from detect_caches.detector.plateaus import stands_out

MISFIT = 4.0             # a fall whose best model misses its points by this many point sigmas (rms) ...
PROMOTE_OCTAVES = 0.5    # ... around a partial plateau this long that stands out from both levels: two falls


def _renumber(an: SweepAnalysis, start: int) -> None:
    """Steps ``start..`` fall below the plateau of their own index again (a plateau was added or
    taken before them)."""
    for j in range(start, len(an.steps)):
        an.steps[j] = dataclasses.replace(an.steps[j], upper=j)


BEFORE_OCTAVES = 0.5   # a partial plateau ending this far before the fall's capacity is not that fall's


def _before_capacity(p, st) -> bool:
    """The fall fitted across the partial plateau puts its capacity well past the plateau's end:
    the model serves those sizes whole, yet they run at a speed of their own (a level whose flat
    stretch a random tail above it hid, taken for a split level's far half)."""
    return p.size_hi_bytes * 2 ** BEFORE_OCTAVES < st.estimate.capacity_bytes


def promote_in_misfits(an: SweepAnalysis, fit) -> None:
    """A fall that no model of one level's fall fits, holding a partial plateau that stands out
    from the levels on both sides, is two falls: that plateau is a level whose flat stretch is
    short (a random tail above it and a wide fall of its own eat it and make it slope). Kept
    where both new falls fit at least twice as well as the one did; a plateau before the fall's
    capacity (_before_capacity), where both fit no worse. The two falls are read the same way in
    turn: three levels that one fall ran through need two plateaus promoted before either fits."""
    i = 0
    while i < len(an.steps):
        i += _promote_at(an, i, fit, PROMOTE_DEPTH)


PROMOTE_DEPTH = 3   # falls inside falls: a fall through up to this many hidden levels is taken apart


def _promote_at(an: SweepAnalysis, i: int, fit, depth: int) -> int:
    """Promote a partial plateau inside the fall below plateau ``i`` where that mends the fall (and
    the falls it leaves, ``depth`` times over): how many falls now stand where that one stood."""
    st, hi, lo = an.steps[i], an.plateaus[i], an.plateaus[i + 1]
    rms = st.estimate.fit_rms_log
    misfit = rms > MISFIT * (an.point_sigma or an.sigma)
    cands = [p for p in st.partials if (misfit or _before_capacity(p, st))
             and p.octaves >= PROMOTE_OCTAVES and stands_out(p, hi) and stands_out(p, lo)]
    if not cands or depth <= 0:
        return 1
    p = max(cands, key=lambda q: q.octaves)
    old = (list(an.plateaus), list(an.partials), list(an.steps))
    an.plateaus.insert(i + 1, p)
    an.partials.remove(p)
    an.steps[i:i + 1] = [fit(i), fit(i + 1)]
    _renumber(an, i + 2)
    # the lower fall first: taking it apart leaves the upper one's index as it is
    n = _promote_at(an, i + 1, fit, depth - 1)
    n += _promote_at(an, i, fit, depth - 1)
    # a misfit must be mended (every new fall twice as good); a plateau the fall served whole is a
    # level already: the falls need only fit no worse
    if max(s.estimate.fit_rms_log for s in an.steps[i:i + n]) < (rms / 2 if misfit else rms):
        return n
    an.plateaus, an.partials, an.steps = old
    return 1


DEMOTE_OCTAVES = 1.5   # a middle level shorter than this ...
THROUGH = 1.5          # ... that one fall fits through as well as (times this) the two beside it ...
AT_NOISE = 2.0         # ... and within this many point sigmas (rms) is part of that fall


def demote_fitted_through(an: SweepAnalysis, fit) -> None:
    """A short middle level that one model's fall fits through, from the level above to the level
    below, as well as the two falls beside it fit and at the points' noise, is partial hits of that
    fall (a cliff's tail whose slope the binned noise hid), not a level: a second refining round
    made generated GPU 263's L1 tail (0.9 octave) a level and the L1 an L0. A plateau that one
    fall fits only to 3 point sigmas (the MI210 table's 4.2 TB/s from 8 to 15 MiB) stays."""
    i = 1
    while i < len(an.plateaus) - 1:
        p = an.plateaus[i]
        if p.octaves >= DEMOTE_OCTAVES or i >= len(an.steps) or an.steps[i].rise or an.steps[i - 1].rise:
            i += 1
            continue
        # the points' noise only as a floor at half its size: near pairs inside a steep fall
        # count its slope too (the built-in mi210 on keyed noise, seed 6: 0.0113 log10 under
        # 1% noise, the falls beside its L3 plateau fitted to 0.0062 and 0.0045; one fall from
        # its 1.16x L2 to memory at 0.0166 passed, and the L3 was taken for partial hits)
        beside = max(an.steps[i - 1].estimate.fit_rms_log, an.steps[i].estimate.fit_rms_log,
                     (an.point_sigma or an.sigma) / 2)
        old = (list(an.plateaus), list(an.partials), list(an.steps))
        an.plateaus.pop(i)
        an.partials = sorted([*an.partials, p], key=lambda q: q.first_bin)
        merged = fit(i - 1)
        rms = merged.estimate.fit_rms_log
        if rms <= THROUGH * beside and rms <= AT_NOISE * (an.point_sigma or an.sigma):
            an.steps[i - 1:i + 1] = [merged]
            _renumber(an, i)
        else:
            an.plateaus, an.partials, an.steps = old
            i += 1
