"""Predict the three-layer table, sample a small ensemble, plot alignment against P.

Run after `pip install ./crates/flscale-py` (matplotlib is optional: without it the numbers
are printed only):

    python examples/table1_and_alignment.py
"""

import flscale

# 1. The paper's Table 1 (Sec. 6.1): three-layer erf network, He3 target, N1 = N2 = d.
table = flscale.predict("fcn3-erf-he3")
print("P*/kappa ∝ d^" + table["p_star_exponent"], "- winners include", table["winners"][:3])
for name in ("GP-GP", "GP-Sp", "Sp-Mag"):
    p = next(p for p in table["patterns"] if p["name"] == name)
    print(f"  {name:7s} parts {p['terms']}  optimum {p['optimum']}  argmin {p['argmin']}")

# 2. A small two-layer ensemble learning He3 at d = N = 16 over a range of P (quick sizes).
d = 16
ps = [d, 4 * d, 16 * d, 40 * d]
alignment, error = [], []
for p in ps:
    r = flscale.sample({
        "model": {"kind": "fcn", "activation": "erf", "widths": [d]},
        "data": {"d": d, "p": p, "n_test": 1000},
        "target": {"hermite": 3},
        # kappa = 0.25 as in the paper's Fig. 2(c); the stable step shrinks like kappa/P
        # (spec 02, "Stiffness is the enemy").
        "sampler": {"kappa": 0.25, "step": 1e-4, "steps": 8000, "burn_in": 4000,
                    "thin": 50, "chains": 8, "seed": 1},
    })
    alignment.append(r["alignment"])
    error.append(r["alignment_err"] or 0.0)
    print(f"P = {p:4d}: alignment {r['alignment']:.3f} ± {r['alignment_err'] or 0:.3f}, "
          f"outliers {r['outliers_layer1']:.2f}, diverged chains {len(r['diverged_chains'])}")

# 3. The figure.
try:
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: skipping the figure (pip install matplotlib)")
else:
    plt.errorbar(ps, alignment, yerr=error, marker="o")
    plt.xscale("log")
    plt.xlabel("P")
    plt.ylabel("alignment A_f")
    plt.title(f"two-layer erf network, He3 target, d = N = {d}")
    plt.savefig("alignment_vs_p.png", dpi=120)
    print("wrote alignment_vs_p.png")
