"""The real device: torch for memory and events, Triton kernels, NVML/amdsmi for clocks. Only
this room imports torch or triton (and only when a GPU is measured)."""
