"""`python -m detect_caches ...`: the command line (detect_caches.cli)."""
from detect_caches import _start

_start.begin()

from detect_caches.cli import cli  # noqa: E402

cli()
