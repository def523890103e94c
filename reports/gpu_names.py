"""Short names that tell the GPUs of one report apart: host:index where that is unique among
them, else the first block of the UUID (GPU-8993d9df), longer where two share it, else the
label reports.identity gives (the UUID, or the path of an unidentified result)."""
from __future__ import annotations

from collections import Counter

from detect_caches.reports.identity import gpu_label
from detect_caches.reports.search import show


def _place(res: dict) -> str | None:
    dev = res["device"]
    return f"{dev['host']}:{dev['index']}" if dev.get("host") and dev.get("index") is not None else None


def _uuid(res: dict, chars: int) -> str | None:
    uuid = str(res["device"].get("uuid") or "")
    return uuid[:chars] if uuid else None


def short_names(results: list[tuple[dict, object]]) -> dict[str, str]:
    """gpu_label -> its short name, for (result, path) pairs of one report."""
    labels = {gpu_label(res, path): res for res, path in results}
    places = [_place(r) for r in labels.values()]
    place_count = Counter(places)        # counted once: a fleet report names thousands of GPUs
    names: dict[str, str] = {}
    for chars in (12, 18, 24, 64):
        uuids = [_uuid(r, chars) for r in labels.values()]
        uuid_count = Counter(uuids)
        for (label, res), place, uuid in zip(labels.items(), places, uuids):
            if place and place_count[place] == 1:
                names[label] = place
            elif uuid and uuid_count[uuid] == 1:
                names[label] = f"{place} {uuid}" if place else uuid
            else:
                names[label] = label
        if len(set(names.values())) == len(names):
            break
    return {label: show(name) for label, name in names.items()}    # drawable and printable
