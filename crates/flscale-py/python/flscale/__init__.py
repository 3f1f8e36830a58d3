"""flscale: predict and measure when and how neural networks learn features.

The scaling heuristic of Rubin, Davidovich & Ringel, "Mitigating the Curse of Detail"
(arXiv 2512.04165), computed by a Rust core. Every function returns plain Python data
(dicts, lists, floats, numpy arrays) equal to what the ``flscale`` command line prints with
``--json``; bad input raises ``ValueError`` with the same one-sentence message.

>>> import flscale
>>> flscale.predict("fcn3-erf-he3")["p_star_exponent"]
'1'
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from . import cavity, kernel, ldt

__version__: str = _native.__version__

__all__ = ["predict", "energy", "presets", "preset_toml", "sample", "free_energy", "sweep", "load_results", "cavity", "ldt", "kernel", "__version__"]


def __dir__() -> List[str]:
    """``dir(flscale)``: the public API (``__all__``), not the modules and typing names the
    package imports for its own use (json, os, Any, Dict, ...)."""
    return sorted(__all__)


def _regime_text(at: Optional[Mapping[str, str]]) -> str:
    if at is None:
        return ""
    if isinstance(at, str):
        return at
    if not isinstance(at, Mapping):
        raise ValueError(f"at must be a dict such as {{'N': 'd^2'}}, not {type(at).__name__}")
    return ",".join(f"{k}={v}" for k, v in at.items())


def predict(arch: Union[str, Mapping[str, Any], "os.PathLike[str]"],
            at: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Predict the winning feature-learning pattern and the P* scaling of an architecture.

    ``arch`` is a preset name (see :func:`presets`), a path to an architecture TOML file,
    TOML text, or a dict with the TOML file's structure. ``at`` overrides the regime, e.g.
    ``{"N1": "d^2"}``. Returns the object ``flscale predict --json`` prints: ``regime``,
    ``patterns`` (each with ``name``, ``terms``, ``energy``, ``optimum``, ``exponent``,
    ``exponent_float``, ``argmin``, ``binding``, ``paper`` ...), ``winners``,
    ``simplest_winners``, ``paper_patterns``, ``p_star_exponent``, ``no_winner_reason``,
    ``reading``.

    ``winners`` lists *every* pattern tied at the smallest exponent of d, including the ones
    the CLI's table leaves out (``muSp``: O(1) neurons specialising with magnitude mu; a
    bracket names a feature other than the default, e.g. ``Sp-GFL[He3]`` amplifies He3 in
    layer 2, ``Mag[Phi]`` magnetises along Phi instead of the target; docs/scaling.md,
    "Pattern names"). ``simplest_winners`` are the ones ``reading`` names: of the paper's
    kinds when any of those is tied, with the fewest feature-learning layers. ``paper_patterns`` are the rows of the paper's table for this
    network and target (``paper_table``, e.g. "Table 1"), empty where the paper has none.
    When no pattern can align (an erf network on an even target such as He2),
    ``winners`` is empty and ``no_winner_reason`` says why.

    Example::

        >>> r = flscale.predict("fcn3-erf-he3", at={"N1": "d^2"})
        >>> r["winners"][:1], r["p_star_exponent"]
        (['GP-Sp'], '1')
        >>> flscale.predict({"network": {"kind": "fcn", "activation": "erf", "widths": ["N"]},
        ...                  "target": {"hermite": 3}, "regime": {"N": "d"}})["p_star_exponent"]
        '1'
    """
    at_text = _regime_text(at) or None
    if isinstance(arch, Mapping):
        return json.loads(_native.predict(json.dumps(arch), "json", at_text))
    if isinstance(arch, os.PathLike):
        return json.loads(_native.predict(os.fspath(arch), "file", at_text))
    if not isinstance(arch, str):
        raise ValueError(f"arch must be a preset name, a path, TOML text or a dict, not {type(arch).__name__}")
    if "\n" in arch or "[network]" in arch:
        kind = "toml"
    elif arch in {name for name, _ in _native.presets()}:
        kind = "preset"
    elif os.path.exists(arch):
        kind = "file"
    else:
        kind = "preset"  # the native side names the available presets in its error
    return json.loads(_native.predict(arch, kind, at_text))


def energy(expr: str, free: Sequence[str] = (), at: Optional[Mapping[str, str]] = None,
           constraints: Sequence[str] = ()) -> Dict[str, Any]:
    """Minimise a power-law energy over free parameters, exactly.

    Returns the object ``flscale energy --json`` prints: ``exponent`` (exact string),
    ``exponent_float``, ``optimum`` (symbolic), ``argmin``, ``active``, ``binding``.

    Example::

        >>> flscale.energy("M*d + N/M", free=["M"], at={"N": "d^3"},
        ...                constraints=["1 <= M <= N"])["optimum"]
        'sqrt(N*d)'
    """
    if isinstance(free, str):
        free = [f for f in free.split(",") if f]
    return json.loads(_native.energy(expr, list(free), list(constraints), _regime_text(at)))


def presets() -> List[Tuple[str, str]]:
    """The built-in architecture presets as (name, summary) pairs.

    Example::

        >>> "fcn3-erf-he3" in dict(flscale.presets())
        True
    """
    return list(_native.presets())


def preset_toml(name: str) -> str:
    """A preset's TOML text, to copy and edit.

    Example::

        >>> print(flscale.preset_toml("fcn2-erf-he3").splitlines()[0])  # doctest: +ELLIPSIS
        # Two-layer erf FCN...
    """
    return _native.preset_toml(name)


def sample(config: Union[str, Mapping[str, Any], "os.PathLike[str]"],
           max_memory: Optional[str] = None) -> Dict[str, Any]:
    """Sample a Bayesian network ensemble by Langevin dynamics (``flscale sample``).

    ``config`` is an experiment as a dict with the TOML file's structure, TOML text, or a path
    to an experiment file. Returns the summary of ``flscale sample --json`` (``alignment``,
    ``alignment_err``, ``test_mse``, ``train_mse``, ``outliers_layer1``, ``r_overlap2``,
    ``diverged_chains``, ...) plus numpy arrays: ``trace`` (dict of 1-D arrays over sampling
    times: ``step``, ``burn_in``, ``energy``, ``alignment``, ``test_mse``, ``r_overlap2``,
    ``outliers``), ``chains`` (dict of per-chain time averages; NaN marks a diverged chain),
    ``histogram`` (``edges``, ``counts`` of the first-layer overlaps) and
    ``mean_test_prediction``. The GIL is released while the chains run.

    Before it runs, the experiment's memory is estimated as ``flscale sample`` does: above
    ``max_memory`` (``"8G"``, ``"500MB"``; default: the machine's available memory) it raises
    ``ValueError`` with the estimate and the sizes to reduce, instead of running out of memory.

    Example::

        >>> r = flscale.sample({
        ...     "model": {"kind": "fcn", "activation": "erf", "widths": [20]},
        ...     "data": {"d": 20, "p": 40, "n_test": 200},
        ...     "target": {"hermite": 3},
        ...     "sampler": {"kappa": 1.0, "step": 1e-3, "steps": 400, "burn_in": 200,
        ...                 "thin": 20, "chains": 4, "seed": 1}})
        >>> r["trace"]["alignment"].shape
        (20,)
    """
    if isinstance(config, Mapping):
        text, kind = json.dumps(config), "json"
    elif isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config and os.path.exists(config)):
        with open(os.fspath(config), encoding="utf-8") as f:
            text, kind = f.read(), "toml"
    elif isinstance(config, str):
        text, kind = config, "toml"
    else:
        raise ValueError(f"config must be a dict, TOML text or a path, not {type(config).__name__}")
    summary_json, arrays = _native.sample(text, kind, max_memory)
    out: Dict[str, Any] = json.loads(summary_json)
    out["trace"] = {k[len("trace_"):]: v for k, v in arrays.items() if k.startswith("trace_")}
    out["chains"] = {k[len("chain_"):]: v for k, v in arrays.items() if k.startswith("chain_")}
    out["histogram"] = {"edges": arrays["hist_edges"], "counts": arrays["hist_counts"]}
    out["mean_test_prediction"] = arrays["mean_test_prediction"]
    return out


def free_energy(config: Union[str, Mapping[str, Any], "os.PathLike[str]"],
                out: Optional[Union[str, "os.PathLike[str]"]] = None, quick: bool = False,
                replicates: int = 200, max_memory: Optional[str] = None) -> Dict[str, Any]:
    """Free energy along an order parameter (``flscale free-energy``, docs/free-energy.md).

    ``config`` is an experiment with a ``[free_energy]`` table, as a dict with the TOML file's
    structure, TOML text, or a path; ``quick`` applies its ``[quick]`` overrides. The umbrella
    windows run one after the other (the GIL released), are joined by MBAR, and every number
    gets a block-bootstrap error from ``replicates`` replicates. With ``out``, each finished
    window is kept in ``out/windows/`` (a rerun resumes) and ``profile.csv``,
    ``free_energy.json`` and ``free_energy.svg`` are written there.

    Returns the object of ``flscale free-energy --json``: ``profile`` with numpy arrays ``s``,
    ``F`` and ``F_err`` (NaN where undefined), ``basins`` (a list of dicts: ``lo``, ``hi``,
    ``min_s``, ``weight``, ``weight_err``, ``observables``), ``barrier`` (``height``, ``err``,
    ``top_s`` ...; None with one basin), ``observables`` (name -> ``{"value", "err"}``) and
    ``diagnostics``. A bad table raises ``ValueError``; windows that do not overlap enough
    raise ``RuntimeError`` naming them.

    Example::

        >>> r = flscale.free_energy("examples/experiments/free-energy-sign.toml", quick=True)  # doctest: +SKIP
        >>> [round(b["weight"], 2) for b in r["basins"]]  # doctest: +SKIP
        [0.5, 0.5]
    """
    import numpy as np

    if isinstance(config, Mapping):
        text, kind = json.dumps(config), "json"
    elif isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config and os.path.exists(config)):
        with open(os.fspath(config), encoding="utf-8") as f:
            text, kind = f.read(), "toml"
    elif isinstance(config, str):
        text, kind = config, "toml"
    else:
        raise ValueError(f"config must be a dict, TOML text or a path, not {type(config).__name__}")
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 0:
        raise ValueError(f"replicates must be a whole number >= 0, not {replicates!r}")
    target = None if out is None else os.fspath(out)
    r: Dict[str, Any] = json.loads(_native.free_energy(text, kind, target, quick, replicates, max_memory))
    p = r["profile"]
    as_array = lambda xs: np.array([np.nan if x is None else x for x in xs], dtype=np.float64)
    r["profile"] = {"s": as_array(p["s"]), "F": as_array(p["F"]), "F_err": as_array(p["F_err"])}
    return r


def load_results(directory: Union[str, "os.PathLike[str]"],
                 skip_damaged: bool = False) -> Dict[str, List[Any]]:
    """The rows of a sweep's results store (``flscale sweep --out DIR``) as columns.

    Returns ``{column: [values]}`` from ``DIR/results.parquet`` (or ``DIR/results.csv`` for a
    sweep run with ``--format csv``): one row per run and observable; run ids and observable
    names as str; the grid index and the integer coordinates (``d``, ``p``, the widths
    ``n1`` ..., ``seed``, and swept fields whose values are TOML integers) as int; the other
    coordinates and the values as float; ``starts_agree`` and ``equilibrated`` as
    True/False (None where not known); missing values as None. A swept field equal to a
    coordinate of its own (``data.d`` when ``d`` is swept) appears once, under the short
    name. ``pandas.DataFrame(...)`` and ``polars.DataFrame(...)`` take it directly;
    ``pandas.read_parquet("DIR/results.parquet")`` reads the stored table, which holds the
    same types (integer columns, boolean verdicts) and keeps each swept field's own column.

    Example::

        >>> import pandas as pd  # doctest: +SKIP
        >>> df = pd.DataFrame(flscale.load_results("sweep-out"))  # doctest: +SKIP
        >>> df[df.observable == "alignment"].pivot(index="p", columns="d", values="value")  # doctest: +SKIP

    Every run is verified against its ``checksums.json`` first: a damaged run (a file edited,
    truncated, deleted or holding NaN) raises ``ValueError`` naming it; with
    ``skip_damaged=True`` its rows are left out and a ``UserWarning`` lists it.
    """
    return dict(_native.load_results(os.fspath(directory), skip_damaged))


def sweep(config: Union[str, "os.PathLike[str]"], out: Union[str, "os.PathLike[str]"],
          quick: bool = False, shard: Optional[Tuple[int, int]] = None,
          format: str = "parquet") -> Dict[str, Any]:
    """Run a sweep (an experiment file with a ``[sweep]`` grid) into the results store ``out``,
    like ``flscale sweep CONFIG --out OUT``: resumable (finished runs are skipped), shardable
    (``shard=(i, n)``, 0-based), Ctrl-C stops it cleanly; the tables are written as
    ``format`` ("parquet" or "csv"). Returns the outcome (runs computed, skipped, finished,
    all-diverged). Read the results with :func:`load_results`.

    Example::

        >>> flscale.sweep("my-sweep.toml", "sweep-out")  # doctest: +SKIP
        {'dir': 'sweep-out', 'grid_runs': 6, 'computed': 6, ...}
    """
    if isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config and os.path.exists(config)):
        with open(os.fspath(config), encoding="utf-8") as f:
            text = f.read()
    elif isinstance(config, str):
        text = config
    else:
        raise ValueError(f"config must be TOML text or a path, not {type(config).__name__}")
    if format not in ("parquet", "csv"):
        raise ValueError(f"format must be \"parquet\" or \"csv\", not {format!r}")
    return json.loads(_native.sweep(text, os.fspath(out), quick, shard, format))
