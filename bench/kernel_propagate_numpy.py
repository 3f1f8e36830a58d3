"""Straightforward numpy reference of `flscale kernel propagate` (paper App. C.5, Fig. 5; spec 05 B).

Same procedure as crates/flscale/src/kernels/propagate.rs, written the obvious way: P x P kernel
matrices and numpy.linalg.eigh, explicit least squares for a, explicit W2 per D.

    python bench/kernel_propagate_numpy.py [--quick] [--d 120 --n1 2000 --n2 1000 --p 6000]
        [--data gaussian|powerlaw] [--activation relu|poly] [--layernorm] [--threads 2]

Prints per-D values, the fitted slopes over D in [8, 64] and the wall time (one JSON line at the end).
Random numbers differ from the Rust run (numpy's generator), so values agree statistically, not
bit for bit.
"""
import argparse, json, time
import numpy as np
from threadpoolctl import threadpool_limits

ap = argparse.ArgumentParser()
ap.add_argument("--d", type=int, default=120)
ap.add_argument("--n1", type=int, default=2000)
ap.add_argument("--n2", type=int, default=1000)
ap.add_argument("--p", type=int, default=6000)
ap.add_argument("--data", default="gaussian", choices=["gaussian", "powerlaw"])
ap.add_argument("--activation", default="relu", choices=["relu", "poly"])
ap.add_argument("--layernorm", action="store_true")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--seed", type=int, default=5)
a = ap.parse_args()
if a.quick:
    a.d, a.n1, a.n2, a.p = 40, 400, 200, 1000
amps = [2.0 ** k for k in range(11)]
fit_lo, fit_hi = 8.0, 64.0
act = (lambda z: np.maximum(z, 0.0)) if a.activation == "relu" else (lambda z: 1.0 + z + z * z)


def run():
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    X = rng.standard_normal((a.p, a.d))
    if a.data == "powerlaw":
        lam = np.arange(1, a.d + 1) ** -1.1
        X *= np.sqrt(lam * a.d / lam.sum())
    W1 = rng.standard_normal((a.n1, a.d)) / np.sqrt(a.d)
    phi1 = act(X @ W1.T)
    if a.layernorm:
        phi1 = (phi1 - phi1.mean(1, keepdims=True)) / phi1.std(1, keepdims=True)
    K2 = phi1 @ phi1.T / a.n1
    w, V = np.linalg.eigh(K2)
    r = a.d // 2
    u = V[:, -r]
    lam_star = w[-r] / a.p
    phi_star = u * np.sqrt(a.p)
    coef = np.linalg.lstsq(phi1, phi_star, rcond=None)[0]
    a_hat = coef / np.linalg.norm(coef)
    f = phi_star ** 2
    f -= f.mean()
    f /= np.sqrt((f ** 2).mean())
    Z = rng.standard_normal((a.n2, a.n1))
    rows = []
    for D in amps:
        W2 = (Z + (np.sqrt(D) - 1.0) * np.outer(Z @ a_hat, a_hat)) / np.sqrt(a.n1)
        phi2 = act(phi1 @ W2.T)
        K3 = phi2 @ phi2.T / a.n2
        ev, U = np.linalg.eigh(K3)
        keep = ev > ev.max() * max(a.p, a.n2) * np.finfo(float).eps
        proj = U[:, keep].T @ f
        rkhs = float(np.sum(proj ** 2 / ev[keep]))
        inv_exp = float(1.0 / (f @ K3 @ f / a.p ** 2))
        rows.append((D, rkhs, inv_exp, int(keep.sum())))
        print(f"D={D:7.0f} rkhs={rkhs:.5e} inv_expectation={inv_exp:.5e} kept={keep.sum()}", flush=True)
    sel = [(np.log(D), np.log(r_), np.log(i_)) for D, r_, i_, _ in rows if fit_lo <= D <= fit_hi]
    x = np.array([s[0] for s in sel])
    slope_r = np.polyfit(x, [s[1] for s in sel], 1)[0]
    slope_i = np.polyfit(x, [s[2] for s in sel], 1)[0]
    return dict(seconds=time.perf_counter() - t0, slope_rkhs=slope_r, slope_inverse_expectation=slope_i,
                phi_star_eigenvalue=lam_star, d=a.d, n1=a.n1, n2=a.n2, p=a.p, threads=a.threads)


with threadpool_limits(limits=a.threads):
    print(json.dumps(run()))
