"""Large deviations of the prior alignment (paper App. A.3, B.3): the Chernoff rate E(α).

Same numbers as ``flscale ldt rate --json`` (see ``docs/ldt-kernels.md``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence

from . import _native

__all__ = ["rate"]


def __dir__() -> List[str]:
    """``dir()`` of the module: its public functions, not the names it imports."""
    return sorted(__all__)


def rate(alpha: Sequence[float] = (0.25, 0.5, 1.0, 2.0), d: float = 40.0, n: float = 40.0,
         sigma1_sq: float = 1.0, sigma2_sq: float = 1.0, perp: str = "prior",
         kappa: float = 1.0) -> Dict[str, Any]:
    """E(α) = sup_t [tα − N log Z(t)] for the two-layer erf network on Ĥe3, with t* and the
    P* estimate 2κE, for each α. ``perp="exact"`` integrates |w_⊥|² instead of fixing it.

    Example::

        >>> r = flscale.ldt.rate(alpha=[1.0])
        >>> round(r["points"][0]["rate"], 1) > 0
        True
    """
    return json.loads(_native.ldt_rate([float(a) for a in alpha], d, n, sigma1_sq, sigma2_sq,
                                       perp, kappa))
