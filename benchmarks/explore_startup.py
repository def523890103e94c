"""Where a fresh process's start-up goes on a GPU host, piece by piece, and what overlapping
the pieces saves: each variant runs in fresh processes (interleaved, --repeats times) and prints
its own timings. Exploration for issue 18; nothing here is part of the tool.

    python3 benchmarks/explore_startup.py --repeats 3 > startup.log
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

PRE = r'''
import time; T0 = time.perf_counter()
import json, threading, ctypes
marks = {}
def mark(k): marks[k] = round(time.perf_counter() - T0, 3)
'''

EARLY_THREAD = r'''
early = {}
def _early():
    t = time.perf_counter()
    cu = ctypes.CDLL("libcuda.so.1")
    early["dlopen"] = round(time.perf_counter() - t, 3)
    rc = cu.cuInit(0); early["cuInit"] = round(time.perf_counter() - t, 3)
    dev = ctypes.c_int(); ctx = ctypes.c_void_p()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    rc2 = cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    early["ctx"] = round(time.perf_counter() - t, 3); early["rc"] = [rc, rc2]
    if NVML:
        import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
        pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM); pynvml.nvmlDeviceGetUUID(h)
        pynvml.nvmlDeviceGetVbiosVersion(h); pynvml.nvmlDeviceGetEccMode(h)
        early["nvml"] = round(time.perf_counter() - t, 3)
th = threading.Thread(target=_early, daemon=True); th.start()
'''

MAIN = r'''
import torch; mark("import torch")
torch.cuda.set_device(0); torch.cuda.init(); torch.empty(1, device="cuda:0"); mark("CUDA context")
if TRITON_THREAD:
    def _tr():
        import triton
        from triton.runtime import driver
        driver.active.get_current_device()
    tt = threading.Thread(target=_tr, daemon=True); tt.start()
props = torch.cuda.get_device_properties(0); mark("props")
if TRITON_THREAD:
    tt.join()
import triton; mark("import triton")
from triton.runtime import driver
driver.active.get_current_device(); mark("triton driver")
if "th" in globals():
    th.join(); mark("early thread joined")
if not NVML:
    import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM); pynvml.nvmlDeviceGetUUID(h)
    pynvml.nvmlDeviceGetVbiosVersion(h); pynvml.nvmlDeviceGetEccMode(h)
mark("NVML")
import triton.language as tl
@triton.jit
def _k(x, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x + o, tl.load(x + o, mask=o < n) + 1, mask=o < n)
x = torch.zeros(1024, device="cuda:0")
_k[(1,)](x, 1024, BLOCK=1024); torch.cuda.synchronize(); mark("first launch")
_k[(1,)](x, 1024, BLOCK=1024); torch.cuda.synchronize(); mark("second launch")
print("RESULT " + json.dumps({"marks": marks, "early": globals().get("early", {})}))
'''

VARIANTS = {
    "baseline": dict(early=False, nvml=False, triton_thread=False),
    "early cuInit+ctx thread": dict(early=True, nvml=False, triton_thread=False),
    "early cuInit+ctx+NVML thread": dict(early=True, nvml=True, triton_thread=False),
    "early thread + triton thread": dict(early=True, nvml=True, triton_thread=True),
}


def source(early: bool, nvml: bool, triton_thread: bool) -> str:
    head = PRE + f"NVML = {nvml and early}\nTRITON_THREAD = {triton_thread}\n"
    return head + (EARLY_THREAD if early else "") + MAIN


def run(code: str, env=None) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    wall = time.perf_counter() - t
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode or not line:
        return wall, {"error": (p.stderr or p.stdout)[-600:]}
    return wall, json.loads(line[0][7:])


def bytecode_facts() -> None:
    code = r'''
import os, sys, importlib.util, json, torch, scipy, triton
out = {"dont_write_bytecode": sys.flags.dont_write_bytecode, "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
       "pycache_prefix": sys.pycache_prefix, "executable": sys.executable, "version": sys.version.split()[0]}
for mod in (torch, scipy, triton):
    d = os.path.dirname(mod.__file__)
    py = pyc = 0
    for root, _dirs, files in os.walk(d):
        for f in files:
            if f.endswith(".py"):
                py += 1
                c = importlib.util.cache_from_source(os.path.join(root, f))
                pyc += os.path.exists(c)
    out[mod.__name__] = {"dir": d, "writable": os.access(d, os.W_OK), "py": py, "pyc": pyc}
print(json.dumps(out))
'''
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    print("bytecode:", p.stdout.strip() or p.stderr[-500:])
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import torch"], capture_output=True,
                       text=True, timeout=120)
    rows = []
    for ln in p.stderr.splitlines():
        parts = ln.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print("import torch, -X importtime, largest cumulative (us):")
    for us, name in sorted(rows, reverse=True)[:25]:
        print(f"  {us:>9} {name}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-bytecode", action="store_true")
    args = ap.parse_args()
    if not args.no_bytecode:
        bytecode_facts()
    run(source(**VARIANTS["baseline"]))   # page cache warm, Triton cache holds the toy kernel
    for i in range(args.repeats):
        for name, v in VARIANTS.items():
            wall, res = run(source(**v))
            print(f"{name:32s} wall {wall:6.2f} s  {json.dumps(res)}", flush=True)


if __name__ == "__main__":
    main()
