"""Progress on stderr: a live bar on a terminal, a few plain lines otherwise (one per stage, as
CI logs and `> log 2>&1` want), nothing with --quiet or when stderr is closed."""
from __future__ import annotations

import sys
import time

STAGES = {"private": "bandwidth, rows by SM/CU", "shared": "bandwidth, whole device", "chase": "latency chase"}


def _stage(m) -> str:
    if m.carveout_kib == m.carveout_kib:     # a launch under an asked-for carveout (--carveouts)
        return "carveout sweeps"
    if m.phase == "peak":
        return "peak probes"
    if m.phase in ("sector", "line"):
        return "sector and line probes"
    return STAGES.get(m.sweep, m.sweep)


class Progress:
    """``total``: the measurements expected (the budget until ``plan`` says more: the bar then
    counts the planned work, stage by stage)."""

    def __init__(self, total: int, *, quiet: bool = False, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = not quiet and self.stream is not None and _writable(self.stream)
        self.total = total
        self.count = 0
        self.bar = None
        self.stage, self.stage_count, self.stage_t0 = "", 0, time.perf_counter()
        self.expected: dict[str, int] = {}   # stage -> measurements planned (done stages: taken)
        self.seen: dict[str, int] = {}       # stage -> measurements taken
        self.last_t = self.stage_t0    # the latest point: a stage lasts from the previous stage's
                                       # last point to its own last (not the analysis between)
        if self.enabled and _isatty(self.stream):
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, unit="pt", file=self.stream, desc="measuring", leave=False)
            except Exception:   # no tqdm, or a stream it cannot draw on: plain lines instead
                self.bar = None

    def plan(self, expected: dict[str, int]) -> None:
        """The work each stage plans (pipeline.progress_plan): the bar's total from now on."""
        self.expected = dict(expected)
        self._retotal()

    def _retotal(self) -> None:
        if not self.expected:
            return
        stages = set(self.expected) | set(self.seen)
        total = max(sum(max(self.expected.get(s, 0), self.seen.get(s, 0)) for s in stages), self.count, 1)
        if total != self.total:
            self.total = total
            if self.bar is not None:
                self.bar.total = total
                self.bar.refresh()

    def __call__(self, m) -> None:
        if not self.enabled:
            return
        self.count += 1
        try:
            stage = _stage(m)
            if stage != self.stage and self.stage in self.expected:
                self.expected[self.stage] = self.seen[self.stage]    # done: what it took, not what it planned
            self.seen[stage] = self.seen.get(stage, 0) + 1
            if self.bar is not None:
                self.stage = stage
                self._retotal()
                self.bar.set_postfix_str(f"{stage}: {m.working_set_bytes / 2**20:.2f} MiB", refresh=False)
                self.bar.update(1)
                return
            now = time.perf_counter()
            if stage != self.stage:
                self._line()
                # from the previous point, unless work other than measuring came between
                gap_start = self.last_t if now - self.last_t < 0.5 else now
                self.stage, self.stage_count, self.stage_t0 = stage, 0, gap_start
            self.stage_count += 1
            self.last_t = now
        except (OSError, ValueError):
            self.enabled = False          # stderr went away: measuring goes on

    def _line(self) -> None:
        if self.stage and self.stage_count:
            print(f"detect-caches: {self.stage}: {self.stage_count} measurements in "
                  f"{self.last_t - self.stage_t0:.1f} s", file=self.stream, flush=True)

    def close(self) -> None:
        if not self.enabled:
            return
        try:
            if self.bar is not None:
                self.bar.total = self.count       # the work is done: the bar ends full
                self.bar.refresh()
                self.bar.close()
            else:
                self._line()
        except (OSError, ValueError):
            pass
        self.enabled = False


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def _writable(stream) -> bool:
    try:
        stream.flush()
        return not getattr(stream, "closed", False)
    except (OSError, ValueError, AttributeError):
        return False
