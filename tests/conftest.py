import os
import sys
from pathlib import Path

# kernels run in Triton's interpreter on the CPU: set before triton is imported anywhere
if not os.environ.get("DETECT_CACHES_GPU_TESTS"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from the tree, uninstalled
# the accuracy benchmark's runner and profiles (benchmarks/accuracy.py), which tests pin GPUs with
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _has_gpu() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1":
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
