"""Results as pandas DataFrames for notebooks: numbers in their own units (bytes, GB/s, ns),
missing ones NaN (sizes as nullable integers), strings only where a field is a word."""
from __future__ import annotations

LEVEL_COLUMNS = (
    ("scope", None), ("capacity_bytes", "Int64"), ("capacity_low_bytes", "Int64"), ("capacity_high_bytes", "Int64"),
    ("api_bytes", "Int64"), ("fall_shape", None), ("bandwidth_gbs", "float64"), ("peak_bandwidth_gbs", "float64"),
    ("ceiling_gbs", "float64"), ("latency_ns", "float64"), ("latency_cycles", "float64"), ("line_bytes", "Int64"),
    ("sector_bytes", "Int64"), ("capacity_repeatability", "float64"), ("bandwidth_repeatability", "float64"),
    ("latency_repeatability", "float64"), ("confidence", "float64"))
COMPARISON_COLUMNS = (("level", None), ("scope", None), ("quantity", None), ("baseline", "float64"), ("current", "float64"),
                      ("change", "float64"), ("detectable", "float64"), ("drift", "bool"), ("fails", "bool"),
                      ("direction", None), ("verdict", None), ("note", None))


def _number(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _frame(rows: list[dict], columns, index: str | None = None):
    import pandas as pd
    data = {}
    for name, dtype in columns:
        values = [r.get(name) for r in rows]
        if dtype in ("Int64", "float64"):
            values = [_number(v) for v in values]
            data[name] = pd.array([None if v is None else (round(v) if dtype == "Int64" else float(v))
                                   for v in values], dtype=dtype)
        elif dtype == "bool":
            data[name] = pd.array([bool(v) for v in values], dtype="bool")
        else:
            data[name] = [v if v not in ("", None) else None for v in values]
    frame = pd.DataFrame(data)
    if index is not None:
        frame.index = pd.Index([r[index] for r in rows], name=index)
    return frame


def levels_frame(result: dict):
    """One row per level (indexed by its name), fastest first."""
    return _frame([dict(lv, level=lv["name"]) for lv in result.get("levels", [])], LEVEL_COLUMNS, "level")


def comparison_frame(cmp):
    """One row per judged figure of a reports.compare.Comparison."""
    rows = [dict(level=v.level.split(" (")[0], scope=v.level.partition(" (")[2].rstrip(")"), quantity=v.quantity, baseline=v.baseline, current=v.current, change=v.change,
                 detectable=v.detectable, drift=v.drift, fails=v.fails(cmp.fail_on), direction=v.direction,
                 verdict=v.word(cmp.fail_on), note=v.note) for v in cmp.verdicts]
    return _frame(rows, COMPARISON_COLUMNS)
