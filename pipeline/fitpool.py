"""Worker processes that polish a fall's models side by side (detector.fitmap), lent to the
analysis passes of a measuring run on a many-core host. Each worker is this module run as a
plain ``python -m`` process (not multiprocessing: a user's script without a main guard would be
run again in every child), started with the run so that its imports are paid while the GPU
measures; tasks and results travel as length-prefixed pickles over its pipes. Any fault (a worker
that did not start, died, or answers nothing within WAIT_S) sends every later polish back to the
analysing process: the same figures, only slower."""
from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from pathlib import Path

MIN_CORES = 4          # a host with fewer cores polishes in the analysing process
MAX_WORKERS = 8        # a fall has nine models at most; the slowest polish bounds the rest
WAIT_S = 30.0          # a worker silent this long is lost
HEADER = struct.Struct("<Q")


def _package_file() -> str:
    """The run's own copy of the package (imported before this module, as its parent): the
    workers must polish with the same code."""
    return sys.modules["detect_caches"].__file__


def workers_for(cpu_count: int | None, sharing: int | None = None) -> int:
    """Workers a run gets on a host of ``cpu_count`` cores shared by ``sharing`` runs (None: the
    ranks torchrun or Slurm put on this node, else 1): all cores but two, split between the runs,
    at most MAX_WORKERS each, and none where that leaves fewer than two (a lone worker only
    hands the polish across); the environment's DETECT_CACHES_FIT_WORKERS, where set, instead."""
    asked = os.environ.get("DETECT_CACHES_FIT_WORKERS", "").strip()
    if asked.isdigit():
        return min(int(asked), 64)
    if not cpu_count or cpu_count < MIN_CORES:
        return 0
    n = min(MAX_WORKERS, (cpu_count - 2) // max(sharing or _ranks_on_node(), 1))
    return n if n >= 2 else 0


def _ranks_on_node() -> int:
    """Runs of a fleet on this node: torchrun's LOCAL_WORLD_SIZE, Slurm's tasks per node ("8" or
    "8(x2)"), else 1."""
    for key in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        text = os.environ.get(key, "").split("(")[0].split(",")[0].strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
    return 1


def pool_for(facts) -> "FitPool | None":
    """The workers a measuring run on ``facts``' device gets: none for a simulated one (its
    sweeps take no time to hide the workers' start behind) nor off POSIX (select on pipes)."""
    n = workers_for(os.cpu_count())
    if facts.simulated or os.name != "posix" or n < 1:
        return None
    return FitPool(n)


class FitPool:
    """``pool(items)``: fallmodels.refine of each (window, model, start), in order, spread over
    the workers; ``close()`` ends them."""

    def __init__(self, workers: int) -> None:
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen] = []
        self.lost, self.workers = "", workers
        root = str(Path(_package_file()).resolve().parent.parent)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        try:
            for _ in range(workers):
                self._procs.append(subprocess.Popen(
                    [sys.executable, "-m", "detect_caches.pipeline.fitpool", _package_file()],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env))
        except OSError as exc:
            self._lose(f"the fit workers did not start ({exc})")

    def __call__(self, tasks: list) -> list:
        with self._lock:
            if self.lost or not self._procs:
                raise RuntimeError(self.lost or "no fit workers")
            try:
                return self._spread(tasks)
            except Exception as exc:
                self._lose(f"a fit worker was lost ({type(exc).__name__}: {exc})")
                raise

    def _spread(self, tasks: list) -> list:
        n = min(len(self._procs), len(tasks))
        shares = [list(range(i, len(tasks), n)) for i in range(n)]
        for proc, share in zip(self._procs, shares):
            data = pickle.dumps([tasks[i] for i in share], protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.write(HEADER.pack(len(data)) + data)
            proc.stdin.flush()
        out: list = [None] * len(tasks)
        for proc, share in zip(self._procs, shares):
            for i, fit in zip(share, _receive(proc.stdout, WAIT_S)):
                out[i] = fit
        if any(f is None for f in out):
            raise RuntimeError("a worker answered too few polishes")
        return out

    def _lose(self, why: str) -> None:
        self.lost = self.lost or why
        self.close()

    def close(self) -> None:
        procs, self._procs = self._procs, []
        for proc in procs:
            try:
                proc.stdin.close()      # end of input: the worker returns
            except OSError:
                pass
        for proc in procs:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _receive(stream, wait_s: float):
    """One length-prefixed pickle from ``stream``, within ``wait_s`` seconds."""
    fd = stream.fileno()

    def read(n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            if not select.select([fd], [], [], wait_s)[0]:
                raise TimeoutError(f"no answer within {wait_s:.0f} s")
            chunk = os.read(fd, n - got)
            if not chunk:
                raise EOFError("the worker ended")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    (size,) = HEADER.unpack(read(HEADER.size))
    return pickle.loads(read(size))


def _serve(parent_file: str) -> int:
    """The worker: polish each batch read from stdin, answer on the original stdout (anything
    the imports print goes to stderr)."""
    if Path(_package_file()).resolve() != Path(parent_file).resolve():
        return 2        # another copy of the package than the run's: polish there, not here
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from detect_caches.detector.fallfit import warm
    from detect_caches.detector.fallmodels import refine
    warm()              # the random-replacement tables and first calls, while the GPU measures
    inp = sys.stdin.buffer
    while True:
        head = inp.read(HEADER.size)
        if len(head) < HEADER.size:
            return 0
        tasks = pickle.loads(inp.read(HEADER.unpack(head)[0]))
        data = pickle.dumps([refine(w, m, f) for w, m, f in tasks], protocol=pickle.HIGHEST_PROTOCOL)
        out.write(HEADER.pack(len(data)) + data)
        out.flush()


if __name__ == "__main__":
    try:
        sys.exit(_serve(sys.argv[1] if len(sys.argv) > 1 else ""))
    except (KeyboardInterrupt, BrokenPipeError):
        sys.exit(1)
