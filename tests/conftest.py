import os
import sys

# kernels run in Triton's interpreter on the CPU: set before triton is imported anywhere
if not os.environ.get('DETECT_CACHES_GPU_TESTS'):
    os.environ.setdefault('TRITON_INTERPRET', '1')
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REFERENCE = ROOT.parent / "shared" / "reference-data" / "gpu-benches"
if not REFERENCE.exists():
    REFERENCE = ROOT / "tests" / "data" / "gpu-benches"


def _has_gpu() -> bool:
    if os.environ.get('TRITON_INTERPRET') == '1':
        return False
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
