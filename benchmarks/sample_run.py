"""Run `detect-caches` in this process while a thread samples every thread's Python stack, and
print where the main thread's time went (a timeline in 100 ms steps and the functions seen most)
and what the other threads did meanwhile. Exploration for issue 18 (wall time); the sampler
takes the interpreter about every 2 ms, so the run is slightly slower than without it.

    python3 benchmarks/sample_run.py profile.txt --gpu 0 --no-latency --out run
"""
from __future__ import annotations

import time

T0 = time.perf_counter()

import collections  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

OURS = ("/measure/", "/pipeline/", "/detector/", "/reports/", "detect_caches.py")


def _stack(frame) -> tuple[str, ...]:
    out = []
    while frame is not None and len(out) < 80:
        co = frame.f_code
        out.append(f"{co.co_filename}:{co.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return tuple(out)


def _short(entry: str) -> str:
    path, func, line = entry.rsplit(":", 2)
    parts = path.split("/")
    return f"{'/'.join(parts[-2:])}:{func}:{line}"


def main() -> int:
    out_path, argv = sys.argv[1], sys.argv[2:]
    samples: list[tuple[float, int, tuple]] = []
    names: dict[int, str] = {}
    done = threading.Event()

    def sampler():
        me = threading.get_ident()
        while not done.is_set():
            t = time.perf_counter() - T0
            for tid, frame in sys._current_frames().items():
                if tid != me:
                    samples.append((t, tid, _stack(frame)))
            done.wait(0.002)
    threading.Thread(target=sampler, daemon=True).start()
    from detect_caches.pipeline import bytecode      # as the command line's entry point does
    bytecode.install()
    import detect_caches
    try:
        rc = detect_caches.main(argv)
    finally:
        done.set()
        wall = time.perf_counter() - T0
        for th in threading.enumerate():
            names[th.ident] = th.name
        _write(out_path, samples, names, wall)
    return rc


def _write(path: str, samples, names, wall: float) -> None:
    main_id = threading.main_thread().ident
    lines = [f"wall {wall:.2f} s, {len(samples)} samples"]
    # timeline of the main thread: for each 100 ms, the innermost frame of ours and the leaf
    buckets: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for t, tid, st in samples:
        if tid != main_id or not st:
            continue
        ours = next((e for e in st if any(o in e for o in OURS)), "")
        buckets[int(t * 10)][(_short(ours) if ours else "-") + "  <  " + _short(st[0])] += 1
    lines.append("\nmain thread, 100 ms steps: most frequent (our frame < leaf), share")
    for b in sorted(buckets):
        c = buckets[b]
        total = sum(c.values())
        top = "; ".join(f"{k} {v / total:.0%}" for k, v in c.most_common(2))
        lines.append(f"{b / 10:5.1f} s  {top}")
    # cumulative: in how many main-thread samples a function appears
    for label, want in (("main thread", lambda tid: tid == main_id), ("other threads", lambda tid: tid != main_id)):
        cum, leaf, n = collections.Counter(), collections.Counter(), 0
        for t, tid, st in samples:
            if not want(tid):
                continue
            n += 1
            for e in set(_short(x).rsplit(":", 1)[0] for x in st):
                cum[e] += 1
            if st:
                leaf[_short(st[0]).rsplit(":", 1)[0]] += 1
        lines.append(f"\n{label}: {n} samples; functions seen most (cumulative, x 2 ms)")
        lines += [f"  {v:6d}  {k}" for k, v in cum.most_common(45)]
        lines.append(f"{label}: leaves")
        lines += [f"  {v:6d}  {k}" for k, v in leaf.most_common(25)]
    per_thread = collections.Counter(names.get(tid, str(tid)) for _t, tid, _s in samples)
    lines.append("\nsamples per thread: " + ", ".join(f"{k} {v}" for k, v in per_thread.most_common()))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
