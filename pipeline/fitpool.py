"""Worker processes that polish a fall's models side by side (detector.fitmap), lent to the
analysis passes of a measuring run on a many-core host. Each worker is a plain Python process
that runs this module's main (not multiprocessing: a user's script without a main guard would be
run again in every child), started with the run so that its imports are paid while the GPU
measures; tasks go as length-prefixed pickles on its stdin, answers come on a pipe of their own
(whatever a start-up hook prints on stdout cannot mix in). Any fault (a worker that did not
start, died, raised, or neither read nor answered within WAIT_S) sends every later polish back to
the analysing process: the same figures, only slower."""
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
# the worker's start: the caller's folder off its path first (``-c`` and ``-m`` put it there, and
# a module of the caller's own named like one the worker imports would run in every worker)
LAUNCH = "import sys; del sys.path[0]; from detect_caches.pipeline.fitpool import main; main()"


def _package_file() -> str:
    """The run's own copy of the package (imported before this module, as its parent): the
    workers must polish with the same code."""
    return sys.modules["detect_caches"].__file__


def usable_cores() -> int | None:
    """The cores this process may run on (a Slurm job's or taskset's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


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
    """Runs of a fleet on this node: torchrun's LOCAL_WORLD_SIZE, Slurm's tasks per node ("8",
    or "8(x2)" where nodes repeat), else 1."""
    for key in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        text = os.environ.get(key, "").split("(")[0].split(",")[0].strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
    return 1


def pool_for(facts) -> "FitPool | None":
    """The workers a measuring run on ``facts``' device gets: none for a simulated one (its
    sweeps take no time to hide the workers' start behind) nor off POSIX (poll on pipes)."""
    n = workers_for(usable_cores())
    if facts.simulated or os.name != "posix" or n < 1:
        return None
    return FitPool(n)


class FitPool:
    """``pool(items)``: fallmodels.refine of each (window, model, start), in order, spread over
    the workers; ``close()`` ends them."""

    def __init__(self, workers: int) -> None:
        self._lock = threading.Lock()
        self._procs: list[tuple[subprocess.Popen, int]] = []     # each worker and its answers' pipe
        self.lost, self.workers, self.calls = "", workers, 0
        root = Path(_package_file()).resolve().parent.parent
        path = [os.environ.get("PYTHONPATH", "")]
        if root.name not in ("site-packages", "dist-packages"):
            path.insert(0, str(root))   # a checkout the run found by its own sys.path
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
        try:
            if not sys.executable:
                raise OSError("no Python executable to start them with")
            for _ in range(workers):
                r, w = os.pipe()
                try:
                    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, _package_file(), str(w)],
                                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, pass_fds=(w,), env=env)
                except BaseException:
                    os.close(r)
                    raise
                finally:
                    os.close(w)
                self._procs.append((proc, r))
        except (OSError, ValueError, TypeError) as exc:
            self._lose(f"the fit workers did not start ({exc})")

    def __call__(self, tasks: list) -> list:
        with self._lock:
            if self.lost or not self._procs:
                raise RuntimeError(self.lost or "no fit workers")
            try:
                self.calls += 1
                return self._spread(tasks)
            except BaseException as exc:    # an interrupt too: answers left in the pipes
                self._lose(f"a fit worker was lost ({type(exc).__name__}: {exc})")
                raise

    def _spread(self, tasks: list) -> list:
        n = min(len(self._procs), len(tasks))
        shares = [list(range(i, len(tasks), n)) for i in range(n)]
        for (proc, _), share in zip(self._procs, shares):
            data = pickle.dumps([tasks[i] for i in share], protocol=pickle.HIGHEST_PROTOCOL)
            _send(proc.stdin.fileno(), HEADER.pack(len(data)) + data, WAIT_S)
        out: list = [None] * len(tasks)
        for (_, answers), share in zip(self._procs, shares):
            got = _receive(answers, WAIT_S)
            if isinstance(got, str):
                raise RuntimeError(f"a polish failed in a worker: {got}")
            for i, fit in zip(share, got):
                out[i] = fit
        if any(f is None for f in out):
            raise RuntimeError("a worker answered too few polishes")
        return out

    def _lose(self, why: str) -> None:
        self.lost = self.lost or why
        self.close()

    def close(self) -> None:
        procs, self._procs = self._procs, []
        for proc, _ in procs:
            try:
                proc.stdin.close()      # end of input: the worker returns
            except OSError:
                pass
        for proc, answers in procs:
            os.close(answers)           # a worker still writing an answer gets a broken pipe
        for proc, _ in procs:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _ready(fd: int, events: int, wait_s: float) -> None:
    poller = select.poll()      # not select(): it refuses descriptors from 1024 up
    poller.register(fd, events)
    if not poller.poll(wait_s * 1000):
        raise TimeoutError(f"a worker neither read nor answered within {wait_s:.0f} s")


def _send(fd: int, data: bytes, wait_s: float) -> None:
    """All of ``data`` to ``fd``, each part within ``wait_s`` seconds of the worker's last read."""
    view = memoryview(data)
    while view:
        _ready(fd, select.POLLOUT, wait_s)
        blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            pass
        finally:
            os.set_blocking(fd, blocking)


def _receive(fd: int, wait_s: float):
    """One length-prefixed pickle from ``fd``, each part within ``wait_s`` seconds."""
    def read(n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            _ready(fd, select.POLLIN, wait_s)
            chunk = os.read(fd, n - got)
            if not chunk:
                raise EOFError("the worker ended")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    (size,) = HEADER.unpack(read(HEADER.size))
    return pickle.loads(read(size))


def _serve(parent_file: str, answers_fd: int) -> int:
    """The worker: polish each batch read from stdin, answer on ``answers_fd`` (a failed polish:
    its error, as text)."""
    if Path(_package_file()).resolve() != Path(parent_file).resolve():
        return 2        # another copy of the package than the run's: polish there, not here
    out = os.fdopen(answers_fd, "wb")
    from detect_caches.detector.fallfit import warm
    from detect_caches.detector.fallmodels import refine
    warm()              # the random-replacement tables and first calls, while the GPU measures
    inp = sys.stdin.buffer
    while True:
        head = inp.read(HEADER.size)
        if len(head) < HEADER.size:
            return 0
        tasks = pickle.loads(inp.read(HEADER.unpack(head)[0]))
        try:
            done = [refine(w, m, f) for w, m, f in tasks]
        except Exception as exc:    # the analysing process polishes again and meets it itself
            done = f"{type(exc).__name__}: {exc}"
        data = pickle.dumps(done, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(HEADER.pack(len(data)) + data)
        out.flush()


def main() -> None:
    """A worker's entry (LAUNCH): the run's package file and the answers' descriptor."""
    try:
        sys.exit(_serve(sys.argv[1], int(sys.argv[2])))
    except (KeyboardInterrupt, BrokenPipeError, IndexError, ValueError):
        sys.exit(1)
