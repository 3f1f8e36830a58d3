"""Kernel feature propagation (paper Sec. 5.2, App. C.5, Figs. 5 and 6).

Same numbers as ``flscale kernel propagate --json`` (see ``docs/ldt-kernels.md``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from . import _native

__all__ = ["propagate"]


def __dir__() -> List[str]:
    """``dir()`` of the module: its public functions, not the names it imports."""
    return sorted(__all__)


def propagate(size: str = "quick") -> Dict[str, Any]:
    """The Fig. 5 procedure: RKHS norm and inverse expectation of Φ*² in the next layer's kernel
    against the amplification D, with the fitted log-log slopes. ``size`` is "quick" (seconds),
    "fig5" or "fig6" (the paper's sizes; minutes).

    Example::

        >>> r = flscale.kernel.propagate("quick")
        >>> "points" in r or len(r) > 0
        True
    """
    return json.loads(_native.kernel_propagate(size))
