"""How to measure: the command line's options, with its defaults, checked with its sentences
whether they come from the command line or from the Python API (a string where a number
belongs, a boolean where a count belongs, a size no device has)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from detect_caches.errors import InputError
from detect_caches.validate import is_number

# a ceiling, not a target (a run ends when nothing asks): the precision readings of noisy, low-ratio
# falls need room past a 4- or 5-level sweep (SIMULATED, physics GPUs 300 x 2 with the latency
# sweep: 400 stopped 234 of 600 runs at the ceiling, two L2s 27% and 44% off; 800, none beyond 20%)
DEFAULT_BUDGET = 800

MIN_BUDGET, MAX_BUDGET = 60, 100_000
MAX_GRID_MULTIPLIER = 64           # programs per SM/CU in the shared sweep: 64 x 4 with the seed's 4
MIN_WORKING_SET = 16 << 20
MAX_WORKING_SET = 1 << 50          # larger than any device: the device's own memory bounds it further


def whole(value, what: str, lo: int, hi: int, flag: str) -> int:
    """``value`` as a whole number within [lo, hi], or the CLI's sentence naming ``flag``."""
    if isinstance(value, bool) or not isinstance(value, int) or not is_number(value):
        if isinstance(value, float) and is_number(value) and value.is_integer():
            value = int(value)
        else:
            raise InputError(f"{what} must be a whole number ({flag}), got {_show(value)}")
    if not lo <= value <= hi:
        raise InputError(f"{what} must be from {lo} to {hi} ({flag}), got {_show(value)}")
    return value


def _show(value) -> str:
    try:
        text = repr(value)
    except ValueError:
        text = "a number too long to print"
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Options:
    """How to measure (the command line's options, with its defaults)."""

    budget: int = DEFAULT_BUDGET
    latency: bool = True
    peaks: bool = True
    timing: str = "events"
    sweeps: tuple[str, ...] = ("private", "shared")
    grid_multiplier: int = 4
    max_working_set_bytes: int | None = None
    carveouts: str | None = None     # "all" or KiB such as "0,32,100,228": the L1 under each (NVIDIA)

    def check(self) -> None:
        if self.timing not in ("events", "device"):
            raise InputError(f"timing must be events or device, got {_show(self.timing)}")
        if isinstance(self.sweeps, str) or not isinstance(self.sweeps, (tuple, list)) or not self.sweeps \
                or any(s not in ("private", "shared") for s in self.sweeps) or len(set(self.sweeps)) < len(self.sweeps):
            raise InputError(f"sweeps take private, shared or both, got {_show(self.sweeps)}")
        for name in ("latency", "peaks"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name} must be True or False, got {_show(getattr(self, name))}")
        budget = whole(self.budget, "the budget", -math.inf, math.inf, "--budget")   # the range below says it
        if budget < MIN_BUDGET:
            raise InputError(f"a budget of {budget} measurements is too small to find levels (at least "
                             f"{MIN_BUDGET}, --budget)")
        self.budget = whole(budget, "the budget", MIN_BUDGET, MAX_BUDGET, "--budget")
        self.grid_multiplier = whole(self.grid_multiplier, "the grid multiplier", 1, MAX_GRID_MULTIPLIER,
                                     "--grid-multiplier")
        mws = self.max_working_set_bytes
        if mws is not None:
            if isinstance(mws, bool) or not is_number(mws) or (isinstance(mws, float) and not mws.is_integer()):
                raise InputError(f"the largest working set must be a whole number of bytes, got {_show(mws)}")
            if mws < MIN_WORKING_SET:
                raise InputError("the largest working set must be at least 16 MiB (--max-working-set 16)")
            if mws > MAX_WORKING_SET:
                raise InputError(f"the largest working set must be at most {MAX_WORKING_SET >> 20:,} MiB "
                                 f"(--max-working-set), got {mws / 2**20:,.3g} MiB")
            self.max_working_set_bytes = int(mws)
        if self.carveouts is not None and not isinstance(self.carveouts, str):
            raise InputError(f"carveouts must be all or KiB such as \"32,64\" (--carveouts), got {_show(self.carveouts)}")

    def session(self):
        from detect_caches.measure.session import SessionOptions
        self.check()
        return SessionOptions(sweeps=tuple(self.sweeps), grid_multiplier=self.grid_multiplier, budget=self.budget,
                              max_working_set_bytes=self.max_working_set_bytes, timing=self.timing,
                              peak_budget=min(24, self.budget // 5) if self.peaks else 0,
                              latency_budget=min(84, self.budget // 4) if self.latency else 0)


def check_against_device(opts, facts) -> None:
    """Sizes the device itself bounds, checked once it is open and before anything is measured."""
    total = getattr(facts, "total_memory_bytes", None)
    if opts.max_working_set_bytes and total and opts.max_working_set_bytes > total:
        raise InputError(f"the largest working set ({opts.max_working_set_bytes / 2**20:,.0f} MiB) is more than the "
                         f"{total / 2**20:,.0f} MiB this device has (--max-working-set)")
