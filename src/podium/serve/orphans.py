"""No process of ``podium serve --processes N`` outlives the one that started it."""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent dies, even by SIGKILL
    (Linux; elsewhere nothing). Called in a child before it runs (``preexec_fn``) or first
    thing in it: a roles process or an API process left behind would go on working, or
    holding the port, with nobody to stop it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
