"""The sizes measurements are taken at, shared by the sweeps that take them (measure) and the
analysis that reads their rows back (detector, reports)."""
from __future__ import annotations

# A sweep's finest step in stream bytes per program: 64 float32 elements, a multiple of the 16
# that lets Triton emit the same 16-byte vector loads at every size (tt.divisibility 16).
GRANULE_BYTES = 256
COARSE_BYTES = 1024            # coarse sweep points are whole KiB
DENSE_SLOT_BYTES = 64          # the latency sweep's slot: two chain elements per 128-byte line, as gpu-latency
