"""Setting a compiled kernel's shared-memory carveout preference through the CUDA driver (the
facts about carveouts are in detect_caches.carveout)."""
from __future__ import annotations

import ctypes

from detect_caches.errors import DeviceError

CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9
CU_SHAREDMEM_CARVEOUT_DEFAULT = -1


class CarveoutSetter:
    """Sets a compiled kernel's carveout preference through the CUDA driver (ctypes: no extra
    package), remembering what each function holds so that a launch pays for no call."""

    def __init__(self):
        self._lib = None
        self._held: dict[int, int] = {}

    def _cuda(self):
        if self._lib is None:
            try:
                self._lib = ctypes.CDLL("libcuda.so.1")
            except OSError as exc:
                raise DeviceError(f"could not load the CUDA driver to set a carveout ({exc})") from None
        return self._lib

    def held_any(self) -> bool:
        """Whether some function holds a preference other than the driver's default."""
        return any(v != CU_SHAREDMEM_CARVEOUT_DEFAULT for v in self._held.values())

    def apply(self, compiled, pct: int | None) -> None:
        """Ask for ``pct`` percent (None: the driver's default) on ``compiled``'s function."""
        fn = getattr(compiled, "function", None)
        if fn is None:
            init = getattr(compiled, "_init_handles", None)
            if callable(init):
                init()
                fn = getattr(compiled, "function", None)
        if fn is None:
            if pct is None:
                return
            raise DeviceError("the compiled kernel has no CUDA function handle; its carveout cannot be set")
        want = CU_SHAREDMEM_CARVEOUT_DEFAULT if pct is None else int(pct)
        if self._held.get(int(fn), CU_SHAREDMEM_CARVEOUT_DEFAULT) == want:
            return
        rc = self._cuda().cuFuncSetAttribute(ctypes.c_void_p(int(fn)),
                                             ctypes.c_int(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT),
                                             ctypes.c_int(want))
        if rc != 0:
            raise DeviceError(f"the CUDA driver refused a carveout preference of {want}% (error {rc})")
        self._held[int(fn)] = want
