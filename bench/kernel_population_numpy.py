"""Independent check of `flscale kernel population` (paper App. C.5, Fig. 5; spec 05 B).

The Fig. 5 procedure at infinite width (N1, N2 -> inf) for ReLU and x ~ N(0, I_d): K2 and K3 are
arc-cosine kernels, Q = K2 + (D-1) lam* u u', f = (u^2 - 1)/sqrt(2) with u = w.x, and
<f, K3, f> = E_{x,x'}[f K3 f'] as a 5-D integral over u, u' (Gauss-Hermite), |x_perp|^2 and
|x'_perp|^2 (chi^2_{d-1}: Gauss-Hermite through the Wilson-Hilferty transform) and the cosine c of
the perpendicular parts (density ~ (1-c^2)^((d-4)/2): Gauss-Jacobi). The Rust code uses
trapezoid rules in ln s and artanh c instead, so the two share only the closed forms.

    python bench/kernel_population_numpy.py [--d 120] [--p 6000]

Prints <f,K3,f>^-1 per D (population and, with --p, the mean at that P to first order in 1/P),
the local slopes and the fitted slope over D in [8, 64].
"""
import argparse
import numpy as np
from scipy.special import roots_hermitenorm, roots_jacobi

ap = argparse.ArgumentParser()
ap.add_argument("--d", type=int, default=120)
ap.add_argument("--p", type=float, default=None)
a = ap.parse_args()
d = a.d
nu, ns, nc = 40, 8, 40
zu, wu = roots_hermitenorm(nu)
wu /= wu.sum()
m = d - 1.0
zz, ws = roots_hermitenorm(ns)
ws /= ws.sum()
ts = m * (1 - 2 / (9 * m) + zz * np.sqrt(2 / (9 * m))) ** 3
zc, wc = roots_jacobi(nc, (d - 4) / 2, (d - 4) / 2)
wc /= wc.sum()
U, Up, S, Sp, C = np.meshgrid(zu, zu, ts, ts, zc, indexing="ij", sparse=True)
W = (wu[:, None, None, None, None] * wu[None, :, None, None, None] * ws[None, None, :, None, None]
     * ws[None, None, None, :, None] * wc[None, None, None, None, :])


def J(r):
    r = np.clip(r, -1, 1)
    return np.sqrt(1 - r * r) + (np.pi - np.arccos(r)) * r


nx = U * U + S
nxp = Up * Up + Sp
dot = U * Up + np.sqrt(S * Sp) * C
K2 = np.sqrt(nx * nxp) / d / (2 * np.pi) * J(dot / np.sqrt(nx * nxp))
lam = float(np.sum(W * U * Up * K2))
g = (U * U - 1) / np.sqrt(2)
gp = (Up * Up - 1) / np.sqrt(2)
print(f"d={d} lambda*={lam:.6g} (1/(4d)={1 / (4 * d):.6g})")
rows = []
for D in [2.0 ** j for j in range(11)]:
    qx = nx / (2 * d) + (D - 1) * lam * U * U
    qxp = nxp / (2 * d) + (D - 1) * lam * Up * Up
    K3 = np.sqrt(qx * qxp) / (2 * np.pi) * J((K2 + (D - 1) * lam * U * Up) / np.sqrt(qx * qxp))
    pop = float(np.sum(W * g * gp * K3))
    emp = None
    if a.p:
        # kbar(x) = E_x' K3(x, x'); mean of f'K3f/P^2 to first order in 1/P (population.rs docs).
        kbar_x = np.sum(W * K3, axis=(1, 3, 4)) / np.sum(W, axis=(1, 3, 4))
        wx = np.sum(W, axis=(1, 3, 4))
        gx = (zu[:, None] ** 2 - 1) / np.sqrt(2)
        qdiag = (zu[:, None] ** 2 + ts[None, :]) / (2 * d) + (D - 1) * lam * zu[:, None] ** 2
        diag = float(np.sum(wx * gx ** 2 * qdiag / 2))  # ReLU: K3(x, x) = Q(x, x)/2
        g2kbar = float(np.sum(wx * gx ** 2 * kbar_x))
        kbar = float(np.sum(wx * kbar_x))
        emp = pop + (diag - 2 * g2kbar + kbar - 3 * pop) / a.p
    rows.append((D, pop, emp))
prev = None
for D, pop, emp in rows:
    line = f"D={D:6.0f} pop={1 / pop:11.5g}" + (f" at P={a.p:.0f}: {1 / emp:11.5g}" if emp else "")
    if prev:
        line += f"  local slope {-np.log(pop / prev[1]) / np.log(2):+.3f}"
    print(line)
    prev = (D, pop, emp)
sel = [r for r in rows if 8 <= r[0] <= 64]
x = np.log([r[0] for r in sel])
print(f"fit [8,64]: population {np.polyfit(x, -np.log([r[1] for r in sel]), 1)[0]:+.4f}", end="")
if a.p:
    print(f"  at P: {np.polyfit(x, -np.log([r[2] for r in sel]), 1)[0]:+.4f}")
else:
    print()
