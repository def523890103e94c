"""Clock and memory-bus readings through NVML (NVIDIA) or amdsmi (AMD), where installed.

Both libraries are optional: without them the facts stay None and the report says so.
"""
from __future__ import annotations

import os

from detect_caches.device import DeviceFacts


def _nvml():
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:  # not installed, or no driver: readings stay unknown
        return None


def nvml_init() -> bool:
    """Initialise NVML ahead (measure.early): later calls find it done. False without it."""
    return _nvml() is not None


def nvidia_gpu_count() -> int | None:
    """GPUs the NVIDIA driver sees (NVML), or None without NVML: counting them this way does
    not import torch (3-4 s on an H200 host, which a node run's parent would pay before its
    children start: BENCHMARKS.md, 2026-11-30, fourth session)."""
    nv = _nvml()
    if nv is None:
        return None
    try:
        return int(nv.nvmlDeviceGetCount())
    except Exception:
        return None


def _amdsmi():
    try:
        import amdsmi
        amdsmi.amdsmi_init()
        return amdsmi
    except Exception:
        return None


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _nvml_environment(nv, h) -> dict:
    """What a driver, firmware or admin change alters, each read on its own (a field the card or
    driver does not support is left out, never guessed)."""
    env: dict = {}
    reads = {
        "driver": lambda: _text(nv.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": lambda: nv.nvmlSystemGetCudaDriverVersion(),
        "vbios": lambda: _text(nv.nvmlDeviceGetVbiosVersion(h)),
        "ecc_mode": lambda: "on" if nv.nvmlDeviceGetEccMode(h)[0] else "off",
        "mig_mode": lambda: "on" if nv.nvmlDeviceGetMigMode(h)[0] else "off",
        "power_limit_w": lambda: round(nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0, 1),
        "app_sm_clock_mhz": lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM),
        "app_mem_clock_mhz": lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
        "max_mem_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM),
        "persistence_mode": lambda: "on" if nv.nvmlDeviceGetPersistenceMode(h) else "off",
        "compute_mode": lambda: {0: "default", 1: "exclusive thread", 2: "prohibited",
                                 3: "exclusive process"}.get(nv.nvmlDeviceGetComputeMode(h), "unknown"),
    }
    for key, read in reads.items():
        try:
            env[key] = read()
        except Exception:   # not supported on this card or driver
            continue
    return env


def fill_facts(facts: DeviceFacts) -> None:
    """Add clocks, bus width, driver, UUID and the environment to ``facts`` where a library can
    read them."""
    if facts.vendor == "nvidia":
        nv = _nvml()
        if nv is None:
            return
        try:
            facts.environment.update(_nvml_environment(nv, nv.nvmlDeviceGetHandleByIndex(facts.index)))
        except Exception:
            pass
        try:
            h = nv.nvmlDeviceGetHandleByIndex(facts.index)
            facts.sm_clock_max_mhz = float(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))
            facts.mem_clock_max_mhz = float(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM))
            facts.memory_bus_width_bits = int(nv.nvmlDeviceGetMemoryBusWidth(h))
            drv = nv.nvmlSystemGetDriverVersion()
            facts.driver = drv.decode() if isinstance(drv, bytes) else str(drv)
            uuid = nv.nvmlDeviceGetUUID(h)
            facts.uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        except Exception:
            pass
        if "HBM" not in facts.name and facts.name.startswith(("NVIDIA L", "NVIDIA A40", "NVIDIA RTX", "NVIDIA GeForce")):
            facts.memory_kind = "DRAM"
    else:
        smi = _amdsmi()
        if smi is None:
            return
        try:
            h = smi.amdsmi_get_processor_handles()[facts.index]
            info = smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)
            facts.sm_clock_max_mhz = float(info.get("max_clk") or 0) or None
            minfo = smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.MEM)
            facts.mem_clock_max_mhz = float(minfo.get("max_clk") or 0) or None
            vram = smi.amdsmi_get_gpu_vram_info(h)
            facts.memory_bus_width_bits = int(vram.get("vram_bit_width") or 0) or None
        except Exception:
            pass
        for key, read in {"driver": lambda: smi.amdsmi_get_gpu_driver_info(h)["driver_version"],
                          "vbios": lambda: smi.amdsmi_get_gpu_vbios_info(h)["version"],
                          "power_limit_w": lambda: smi.amdsmi_get_power_cap_info(h)["power_cap"] / 1e6}.items():
            try:
                h = smi.amdsmi_get_processor_handles()[facts.index]
                facts.environment[key] = read()
            except Exception:
                continue


class ClockReader:
    """Reads the current SM/CU clock (MHz) cheaply; None where no library is present."""

    def __init__(self, facts: DeviceFacts):
        self.vendor = facts.vendor
        self._lib = _nvml() if facts.vendor == "nvidia" else _amdsmi()
        self._handle = None
        if self._lib is not None:
            try:
                if self.vendor == "nvidia":
                    self._handle = self._lib.nvmlDeviceGetHandleByIndex(facts.index)
                else:
                    self._handle = self._lib.amdsmi_get_processor_handles()[facts.index]
            except Exception:
                self._lib = None

    def sm_clock_mhz(self) -> float | None:
        if self._lib is None:
            return None
        try:
            if self.vendor == "nvidia":
                return float(self._lib.nvmlDeviceGetClockInfo(self._handle, self._lib.NVML_CLOCK_SM))
            info = self._lib.amdsmi_get_clock_info(self._handle, self._lib.AmdSmiClkType.GFX)
            return float(info.get("clk") or 0) or None
        except Exception:
            return None

    def other_processes(self) -> int | None:
        """Processes other than this one that hold the GPU now (NVIDIA, through NVML)."""
        if self._lib is None or self.vendor != "nvidia":
            return None
        try:
            procs = list(self._lib.nvmlDeviceGetComputeRunningProcesses(self._handle))
            procs += list(self._lib.nvmlDeviceGetGraphicsRunningProcesses(self._handle))
        except Exception:
            return None
        return len({p.pid for p in procs} - {os.getpid()})

    def close(self) -> None:
        pass
