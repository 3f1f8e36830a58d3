#!/usr/bin/env python3
"""Independent numpy check of the blog's scalar reduction at the blog preset (docs/cavity.md,
"Physics review at the blog preset"). Needs numpy and scipy; minutes per variant on two cores.

The single-neuron posterior of blog §"Score one neuron against the residual" is evaluated in
four ways, each iterated to self-consistency with the kernel K = N s_a² E[φφᵀ] (Monte Carlo over
2000 weights drawn from the current overlap law, perpendicular part at its prior) and the mean
residual r̄ = T(K + T·I)⁻¹y:

  blog    U(ρ) = Dρ²/(2σ_w²) + ½log L − s_a²P²m(ρ)²/(2T²L), L = 1 + s_a²Pv/T, (b, c) from the
          least-squares projection of r̄ (what `flscale cavity` implements);
  Ltilde  the same with the other readouts integrated out too (matrix determinant lemma):
          L̃(ρ) = 1 + s_a²E_ξ[φᵀ(K + T·I)⁻¹φ] in place of L;
  exactS  S = φᵀr̄ on the training set instead of P·m(ρ; b, c), the blog's L, and the
          perpendicular part ξ integrated: p(ρ) ∝ e^{−Dρ²/(2σ_w²)}E_ξ[L^{−½}e^{s_a²S²/(2T²L)}];
  both    exactS with L̃(ρ, ξ) = 1 + s_a²φᵀ(K + T·I)⁻¹φ.

Usage: cavity_review.py VARIANT cold|hot P1,P2,...   (prints R, outliers, b, c, test MSE)
       cavity_review.py diag P1,P2,...               (L vs L̃ and S vs P·m on the blog fixed point)
"""
import sys

import numpy as np
from scipy.special import erf

D = N = 20
T, SA2, S2, EPS = 0.05, 1 / 20, 1.0, 0.3
RG = np.linspace(0, 6, 3001)  # overlap grid for p(ρ)
M = 2000  # weights in the Monte Carlo kernel
XI = np.random.default_rng(1).standard_normal((M, D - 1)) * np.sqrt(S2 / (D - 1))
QU = (np.arange(M) + 0.5) / M
RC = np.linspace(0, 4, 81)  # coarse ρ grid for the ξ-averaged variants
MX = 150  # ξ samples per ρ


def data(p, seed=0):
    x = np.random.default_rng(seed).standard_normal((p, D))
    z = x[:, 0]
    return x, z, z + EPS * (z**3 - 3 * z)


def m_fn(rho, b, c):
    a = 1 + 2 * (S2 + rho**2)
    return 2 / np.sqrt(np.pi) * rho / np.sqrt(a) * (b - 2 * c * rho**2 / a)


def v_fn(q):
    return 2 / np.pi * np.arcsin(2 * q / (1 + 2 * q))


def u_blog(p, b, c):
    lf = 1 + SA2 * p / T * v_fn(S2 + RG**2)
    return D * RG**2 / (2 * S2) + 0.5 * np.log(lf) - SA2 * p**2 * m_fn(RG, b, c) ** 2 / (2 * T**2 * lf)


def law(u):
    w = np.exp(-(u - u.min()))
    w[1:] *= 2
    return w / w.sum()


def weights(pw):
    rho = RG[np.minimum(np.searchsorted(np.cumsum(pw), QU), len(RG) - 1)]
    return np.column_stack([rho * np.where(np.arange(M) % 2 == 0, 1, -1), XI])


def kernel_step(x, y, z, pw):
    phi = erf(x @ weights(pw).T)
    a_inv = np.linalg.inv(N * SA2 * phi @ phi.T / M + T * np.eye(len(y)))
    r_bar = T * a_inv @ y
    bc = np.linalg.lstsq(np.column_stack([z, z**3 - 3 * z]), r_bar, rcond=None)[0]
    return phi, a_inv, r_bar, bc


def u_variant(variant, p, x, bc, r_bar, a_inv):
    if variant == "blog":
        return u_blog(p, *bc)
    out = []
    for rho in RC:
        ph = erf(x @ np.column_stack([np.full(MX, rho), XI[:MX]]).T)
        l_blog = 1 + SA2 / T * (ph**2).sum(0)
        l_int = 1 + SA2 * np.einsum("pm,pm->m", ph, a_inv @ ph)
        if variant == "Ltilde":
            lf = l_int.mean()
            out.append(D * rho**2 / (2 * S2) + 0.5 * np.log(lf) - SA2 * p**2 * m_fn(rho, *bc) ** 2 / (2 * T**2 * lf))
            continue
        s = ph.T @ r_bar
        lf = l_blog if variant == "exactS" else l_int
        ex = -0.5 * np.log(lf) + SA2 * s**2 / (2 * T**2 * lf)
        out.append(D * rho**2 / (2 * S2) - (ex.max() + np.log(np.mean(np.exp(ex - ex.max())))))
    return np.interp(RG, RC, np.array(out), right=1e9)


def solve(variant, start, p):
    x, z, y = data(p)
    pw = law(D * RG**2 / (2 * S2)) if start == "cold" else law(u_blog(p, 1.0, EPS))
    phi, a_inv, r_bar, bc = kernel_step(x, y, z, pw)
    for _ in range(30):
        # Damped on the overlap law (the exact-S variants do not go through (b, c)).
        pw = 0.6 * pw + 0.4 * law(u_variant(variant, p, x, bc, r_bar, a_inv))
        phi, a_inv, r_bar, bc = kernel_step(x, y, z, pw)
    xt, _, yt = data(1000, seed=99)
    pred = N * SA2 * erf(xt @ weights(pw).T) @ phi.T / M @ (a_inv @ y)
    mse = np.mean((yt - pred) ** 2) / (1 + 6 * EPS**2)
    r = (pw * RG**2).sum()
    outliers = N * pw[RG > 3 * np.sqrt(S2 / D)].sum()
    print(f"{variant} {start} P={p} R={r:.4f} outliers={outliers:.2f} b={bc[0]:+.4f} c={bc[1]:+.4f} test_mse/E[y2]={mse:.3f}", flush=True)


def diag(p):
    x, z, y = data(p)
    pw = law(D * RG**2 / (2 * S2))
    phi, a_inv, r_bar, bc = kernel_step(x, y, z, pw)
    for _ in range(40):
        pw = law(u_blog(p, *bc))
        phi, a_inv, r_bar, new = kernel_step(x, y, z, pw)
        bc = 0.5 * bc + 0.5 * new
    print(f"P={p} b={bc[0]:+.4f} c={bc[1]:+.4f} R={(pw * RG**2).sum():.4f}")
    for rho in [0.0, 1.0, 2.0]:
        ph = erf(x @ np.column_stack([np.full(300, rho), XI[:300]]).T)
        l_blog = 1 + SA2 / T * (ph**2).sum(0).mean()
        l_int = 1 + SA2 * np.einsum("pm,pm->m", ph, a_inv @ ph).mean()
        s = ph.T @ r_bar
        print(f"  rho={rho}: L={l_blog:.2f} L~={l_int:.2f}  S=phi.r: mean {s.mean():+.3f} sd {s.std():.3f}  P*m={p * m_fn(rho, *bc):+.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "diag":
        for p in map(int, sys.argv[2].split(",")):
            diag(p)
    else:
        for p in map(int, sys.argv[3].split(",")):
            solve(sys.argv[1], sys.argv[2], p)
