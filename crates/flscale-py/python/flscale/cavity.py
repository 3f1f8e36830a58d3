"""The solvable two-layer model: cavity potential, phases, self-consistent adaptive kernel.

Same numbers as ``flscale cavity ... --json`` (see ``docs/cavity.md``); the setting is the blog's
two-layer erf network learning y = H1(z) + eps*H3(z) (spec 04).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import _native

__all__ = ["potential", "phase", "solve"]


def __dir__() -> List[str]:
    """``dir()`` of the module: its public functions, not the names it imports."""
    return sorted(__all__)


def potential(rho: Sequence[float], sigma_w2: float = 0.5, b: float = 0.3, c: float = -0.3,
              u: Optional[float] = None, p: Optional[float] = None, d: float = 20.0,
              n: float = 20.0, t: float = 0.05, s_a2: Optional[float] = None) -> np.ndarray:
    """The single-neuron potential per dimension on the overlaps ``rho``.

    With ``u``: the mean-field Ũ_u(ρ)/D = ρ²/(2σ_w²) − (2u/π)·ρ²/(1+2q)·(b − 2cρ²/(1+2q))²,
    q = σ_w² + ρ². With ``p``: the finite-size U(ρ; b, c)/D at P samples, dimension ``d``,
    likelihood variance ``t`` and readout variance ``s_a2`` (default 1/n).

    Example::

        >>> rho = np.linspace(-1.5, 1.5, 7)
        >>> flscale.cavity.potential(rho, u=22.09).shape
        (7,)
    """
    r = [float(x) for x in np.asarray(rho, dtype=float).ravel()]
    if (u is None) == (p is None):
        raise ValueError("give exactly one of u (mean-field potential) or p (finite-size potential)")
    if u is not None:
        return _native.cavity_potential(r, sigma_w2, b, c, u=float(u))
    sa2 = (1.0 / n) if s_a2 is None else s_a2
    return _native.cavity_potential(r, sigma_w2, b, c, finite=(float(d), float(p), float(t), float(sa2)))


def phase(sigma_w2: float = 0.5, b: float = 0.3, c: float = -0.3, d: int = 20) -> Dict[str, Any]:
    """Mean-field phases of Ũ_u: ``u_fold``, ``u_coexist`` (with ``rho_star``), ``u_spinodal``,
    each with its closed form, and R = E[ρ²] on both sides (``flscale cavity phase --json``).

    Example::

        >>> round(flscale.cavity.phase(sigma_w2=1.0, b=0.3, c=-0.3)["u_spinodal"]["u"], 6)
        26.179939
    """
    return json.loads(_native.cavity_phase(sigma_w2, b, c, d))


def solve(p: int = 150, d: int = 20, n: int = 20, t: float = 0.05, s_a2: Optional[float] = None,
          sigma_w2: float = 1.0, eps: float = 0.3, seed: int = 0, p_test: int = 1000,
          damping: float = 0.5, max_iter: int = 400, tol: float = 1e-7) -> Dict[str, Any]:
    """The self-consistent adaptive-kernel fixed point on a sampled data set, from a small and a
    large alignment start (``flscale cavity solve --json``): b, c, R, test MSE, the expected
    number of specialised neurons, the predicted weight covariance and the adaptive-kernel free
    energy of each branch, and (with two solutions) the preferred one. Defaults are the blog
    preset (D = N = 20, T = 0.05).

    Example::

        >>> r = flscale.cavity.solve(p=60)
        >>> sorted(r)[:3]
        ['aligned', 'params', 'preferred']
    """
    return json.loads(_native.cavity_solve(p, d, n, t, s_a2, sigma_w2, eps, seed, p_test,
                                           damping, max_iter, tol))
