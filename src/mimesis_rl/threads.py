"""torch's intra-op thread count, chosen once per process without importing torch.

Why its own torch-free module: every stage sets its threads first thing (`tasks._runner`), and most
stages that touch no model (ingest, split, promote, report) used to pay ~3.5 s importing torch and
transformers for it. Before torch is imported the choice goes through `OMP_NUM_THREADS`, which torch
reads when it starts; once torch is loaded it is set directly.
"""

from __future__ import annotations

import os
import sys


def wanted_threads(threads: int | None = None) -> int:
    """`threads`, else `MIMESIS_THREADS`, else the cores this process may run on (not `os.cpu_count()`,
    which counts cores a container cannot use)."""
    return threads or int(os.environ.get("MIMESIS_THREADS", "0") or 0) or len(os.sched_getaffinity(0))


def set_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads for this process (and the processes it starts) and return them."""
    wanted = wanted_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(wanted)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)
    return wanted
