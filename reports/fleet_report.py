"""The fleet report's content and its three renderings: fleet.md, fleet.json and fleet.csv
(built by reports.fleet)."""
from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass, field

from detect_caches.reports.fmt import fmt_bytes, fmt_gbs, level_key, markdown_table
from detect_caches.reports.gpu_names import short_names
from detect_caches.reports.identity import gpu_label
from detect_caches.reports.summary import fmt_bw, fmt_latency, scope_words

TABLE_IN_MARKDOWN = 64     # larger fleets: the full table is in fleet.csv and fleet.json only
FIGURES = (("capacity_bytes", fmt_bytes), ("bandwidth_gbs", fmt_gbs), ("latency_ns", lambda v: f"{v:.1f} ns"))
CSV_FIELDS = ("capacity_bytes", "bandwidth_gbs", "latency_ns", "capacity_repeatability", "bandwidth_repeatability",
              "latency_repeatability")


def gpu_place(result: dict) -> str:
    dev = result["device"]
    return f"{dev.get('host') or '?'}:{dev.get('index', '?')}"


def _label(res: dict) -> str:
    return gpu_label(res, res.get("source_path"))


def distribution(results: list[dict], key: str, field_name: str) -> dict | None:
    values = sorted(lv[field_name] for r in results for lv in r["levels"]
                    if level_key(lv) == key and isinstance(lv.get(field_name), (int, float)))
    if not values:
        return None
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return {"n": len(values), "median": med, "spread": 1.4826 * mad / med if med else 0.0,
            "min": values[0], "max": values[-1]}


@dataclass
class FleetReport:
    results: list[dict]
    median: dict
    outliers: dict[str, list[str]] = field(default_factory=dict)   # gpu label -> what fails the check
    failed: list[str] = field(default_factory=list)               # GPUs without a result
    context: str = ""                                              # how the GPUs were measured
    set_aside: int = 0                                             # older results of GPUs seen twice
    fail_on: str = "worse"
    changed: dict[str, list[str]] = field(default_factory=dict)    # changes the check does not fail on
    baselines: dict[str, str] = field(default_factory=dict)        # gpu label -> which run is its baseline
    verdicts: dict[str, list[dict]] = field(default_factory=dict)  # gpu label -> every figure judged
    disagreements: list[str] = field(default_factory=list)         # two GPUs that do not agree
    unresolved: bool = False                                       # ... and nothing says which is right
    notes: list[str] = field(default_factory=list)
    tolerances: dict = field(default_factory=dict)                 # capacity/bandwidth/latency -> tolerance

    @property
    def names(self) -> dict[str, str]:
        """gpu label -> the short name reports show (host:index where unique, else the UUID's start)."""
        return short_names([(r, r.get("source_path")) for r in self.results])

    def heading(self, key: str) -> str:
        """"L1 per SM", "L2 per XCD", "HBM": a level key as a reader reads it."""
        name, _, scope = key.partition(" (")
        words = scope_words(scope.rstrip(")"), self.results[0]["device"].get("vendor"))
        return name if words == "device" else f"{name} {words}"

    @property
    def drift(self) -> bool:
        """The check fails: an outlier, or two GPUs that disagree with nothing to say which is off."""
        return bool(self.outliers) or self.unresolved

    def _keys(self) -> list[str]:
        return [level_key(lv) for lv in self.median["levels"]]

    def _ordered(self) -> list[dict]:
        return sorted(self.results, key=lambda r: (_label(r) not in self.outliers, gpu_place(r)))

    def _cells(self, res: dict, verdict: str, name: str) -> list[str]:
        dev = res["device"]
        lv = {level_key(x): x for x in res["levels"]}
        row = [name, str(dev.get("uuid") or "-")]
        for k in self._keys():
            x = lv.get(k)
            if x is None:
                row.append("absent")
                continue
            parts = [fmt_bytes(x["capacity_bytes"])] if x.get("capacity_bytes") else []
            parts.append(fmt_bw(x.get("bandwidth_gbs")))
            parts += [fmt_latency(x)] if x.get("latency_ns") is not None else []
            row.append(", ".join(parts))
        return row + [verdict]

    def markdown(self) -> str:
        names = sorted({r["device"].get("name", "?") for r in self.results})
        lines = [f"# Fleet report: {len(self.results)} GPU(s) ({', '.join(names)})", ""]
        if self.context:
            lines += [self.context, ""]
        verdict = f"**{len(self.outliers)} outlier(s)**" if self.outliers else "no outliers"
        if self.unresolved:
            verdict += ", **two GPUs that disagree**"
        if self.failed:
            verdict += f"; **incomplete**: {len(self.failed)} GPU(s) without a result (below)"
        lines += [f"Result: {verdict}. A GPU is an outlier when a level's capacity, bandwidth or latency differs "
                  f"from the fleet median (three GPUs or more) or from its baseline by more than the tolerance and "
                  f"by more than the repeatabilities explain, in a direction the check fails on (--fail-on "
                  f"{self.fail_on}), or a level is missing or extra (as in `compare`).", ""]
        names = self.names

        def who(g: str) -> str:
            return names.get(g, g)
        if self.outliers:
            lines += ["## Outliers", ""]
            lines += [f"- {who(g)}: " + "; ".join(w) for g, w in self.outliers.items()]
            lines.append("")
        if self.disagreements:
            lines += ["## Two GPUs", ""] + [f"- {d}" for d in self.disagreements] + [""]
        if self.changed:
            lines += [f"Changes the check does not fail on (--fail-on {self.fail_on}):", ""]
            lines += [f"- {who(g)}: " + "; ".join(w) for g, w in self.changed.items()]
            lines.append("")
        if self.baselines:
            lines += ["Baselines: " + "; ".join(f"{g}: {how}" for g, how in self.baselines.items()), ""]
        if self.failed:
            lines += ["GPUs without a result: " + "; ".join(self.failed), ""]
        if self.set_aside:
            lines += [f"{self.set_aside} older result(s) of GPUs measured more than once were set aside "
                      f"(the newest counts).", ""]
        lines += [f"{n}." for n in self.notes] + ([""] if self.notes else [])
        lines += ["## Levels across the fleet", ""]
        rows = []
        for key in self._keys():
            for name, unit in FIGURES:
                d = distribution(self.results, key, name)
                if d:
                    rows.append([self.heading(key), name.split("_")[0], str(d["n"]), unit(d["median"]),
                                 f"{d['spread']:.2%}", unit(d["min"]), unit(d["max"])])
        lines += [markdown_table(["level", "figure", "GPUs", "median", "spread (1.48 MAD)", "min", "max"], rows), ""]
        if len(self.results) <= TABLE_IN_MARKDOWN:
            trows = [self._cells(r, "OUTLIER: " + "; ".join(self.outliers[_label(r)])
                                 if _label(r) in self.outliers else "ok", who(_label(r))) for r in self._ordered()]
            trows.append(self._cells(self.median, "fleet median", "fleet median"))
            lines += ["## Every GPU", "", "Each level: size (where it has one), bandwidth, latency.", "",
                      markdown_table(["GPU", "UUID"] + [self.heading(k) for k in self._keys()] + ["verdict"], trows), ""]
        else:
            lines += [f"The table of all {len(self.results)} GPUs is in fleet.csv and fleet.json.", ""]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        names = self.names
        return {"schema_version": 3, "context": self.context, "fail_on": self.fail_on, "failed_check": self.drift,
                "outliers": self.outliers, "changed": self.changed, "disagreements": self.disagreements,
                "failed": self.failed, "set_aside": self.set_aside, "notes": self.notes,
                "distribution": {k: {n: distribution(self.results, k, n) for n, _ in FIGURES}
                                 for k in self._keys()},
                "median": self.median["levels"],
                "gpus": [{"label": _label(r), "place": gpu_place(r), "name": names.get(_label(r)),
                          "device": r["device"], "levels": r["levels"],
                          "outlier": _label(r) in self.outliers, "baseline": self.baselines.get(_label(r)),
                          "verdicts": self.verdicts.get(_label(r), [])} for r in self._ordered()]}

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)
        keys = self._keys()
        w.writerow(["gpu", "uuid", "host", "index", "outlier"] + [f"{k} {f}" for k in keys for f in CSV_FIELDS])
        for r in self._ordered():
            lv = {level_key(x): x for x in r["levels"]}
            dev = r["device"]
            row = [_label(r), dev.get("uuid") or "", dev.get("host") or "", dev.get("index", ""),
                   "yes" if _label(r) in self.outliers else "no"]
            for k in keys:
                x = lv.get(k) or {}
                row += ["" if x.get(f) is None else x[f] for f in CSV_FIELDS]
            w.writerow(row)
        return buf.getvalue()
