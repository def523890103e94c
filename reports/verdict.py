"""One figure's verdict: its change between two results, the smallest change the two runs could
detect, and the direction of the change. Which directions fail a check is the user's choice
(``--fail-on worse``, the default, or ``any``), as in pyperf and asv: an improvement is reported,
never silently dropped, and does not fail a job unless asked.

Directions: a capacity (and a line or sector size) is ``smaller`` or ``larger``; a bandwidth or a
latency is ``worse`` or ``better``; a level is ``vanished`` or ``appeared``. Only a bandwidth or
a latency can improve: a capacity, line or sector size that changed either way, or a level that
vanished or appeared, counts as worse (the hierarchy is not what it was: a larger L1 can be
shared memory that a driver took away)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from detect_caches.errors import InputError

FAIL_ON = ("worse", "any")
QUANTITIES = ("level", "capacity", "bandwidth", "latency", "line", "sector")


def parse_tolerance(value, what: str = "tolerance") -> float:
    """A relative tolerance written ``3%`` or ``0.03`` (a string or a number); a bare number
    above 1 is refused (``3`` could mean 3% or 300%)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"{what} must be written 3% or 0.03, got {value!r}")
    text = value.strip() if isinstance(value, str) else value
    percent = isinstance(text, str) and text.endswith("%")
    try:
        number = float(text[:-1] if percent else text)
    except (ValueError, OverflowError):
        raise InputError(f"{what} must be written 3% or 0.03, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{what} must be a fraction >= 0, written 3% or 0.03, got {value!r}")
    if percent:
        number /= 100
    elif number > 1:
        raise InputError(f"{what} {value!r} is ambiguous: write {value}% for a percentage, or a fraction "
                         f"such as 0.03")
    if number > 1:
        raise InputError(f"{what} must be at most 100%, got {value!r}")
    return number


def check_fail_on(value) -> str:
    if value not in FAIL_ON:
        raise InputError(f"fail_on must be worse or any, got {value!r}")
    return value


@dataclass
class Verdict:
    """One figure of one level, judged. Values are in the figure's own unit (bytes, GB/s, ns)."""

    level: str                      # "L2 (device)"
    quantity: str                   # see QUANTITIES
    baseline: float | None
    current: float | None
    baseline_text: str
    current_text: str
    change: float | None = None     # current / baseline - 1
    detectable: float | None = None  # the smallest relative change the two runs could detect
    drift: bool = False             # beyond the tolerance and the repeatabilities
    direction: str = ""             # smaller, larger, worse, better, vanished, appeared ("" unchanged)
    worse: bool = False             # the change counts under --fail-on worse
    note: str = ""                  # why a change is not called drift (a clock), or what is unknown

    @property
    def figure(self) -> str:
        return f"{self.level} {self.quantity}"

    @property
    def ratio(self) -> float | None:
        return None if self.change is None else self.change + 1

    def fails(self, fail_on: str) -> bool:
        return self.drift and (fail_on == "any" or self.worse)

    def word(self, fail_on: str) -> str:
        """ok, drift (fails the check) or changed (a change the check does not fail on)."""
        if not self.drift:
            return "ok"
        return "drift" if self.fails(fail_on) else "changed"

    def cell(self, fail_on: str) -> str:
        """The verdict column of a Markdown table."""
        if not self.drift:
            return "ok" + (f" ({self.note})" if self.note else "")
        ratio = f", x{self.ratio:.3f}" if self.ratio is not None else ""
        if self.fails(fail_on):
            return f"DRIFT: {self.direction}{ratio}"
        return f"{self.direction}{ratio} (not a failure under --fail-on {fail_on})"

    def to_dict(self, fail_on: str) -> dict:
        return {"figure": self.figure, "level": self.level, "quantity": self.quantity,
                "baseline": self.baseline, "current": self.current,
                "change": None if self.change is None else round(self.change, 6),
                "ratio": None if self.ratio is None else round(self.ratio, 6),
                "detectable": None if self.detectable is None else round(self.detectable, 6),
                "verdict": self.word(fail_on), "direction": self.direction or None,
                "fails": self.fails(fail_on), "note": self.note}


def direction_of(quantity: str, change: float) -> tuple[str, bool]:
    """(direction word, counts as worse) of a change of ``quantity``."""
    if quantity == "bandwidth":
        return ("worse", True) if change < 0 else ("better", False)
    if quantity == "latency":
        return ("worse", True) if change > 0 else ("better", False)
    return ("smaller" if change < 0 else "larger"), True      # capacity, line, sector: the geometry changed
