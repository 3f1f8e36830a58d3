"""Table of the cavity's Langevin overlay at beta = 1/8 (issue 18, item 4; RESULTS.md).

Reads `flscale cavity solve --json` outputs (RUNS/cavity<T>.json) and `flscale sample` run
directories (RUNS/s<T>-<start>/), made by the commands in docs/cavity.md ("Langevin overlay"),
and prints one row per sigma^2 = T and source. Rules:
* outliers: neurons per network with |rho| > 3 sigma_w/sqrt(D) (paper App. F.0.1), the
  sampler's `outliers_layer1` and the cavity's `outliers` (the same criterion on p(rho | b, c));
* side mass: the fraction of neuron samples with |rho| > 1/2 (half-way to the side minima near
  |rho| ~ 1 of the mixed phase), from the sampler's histogram_rho.csv; the cavity's `side_mass`
  is its mass beyond the potential's barrier (0 when U has no side minimum);
* He1, He3: the mean predictor's coefficients on He_1(Phi*), He_3(Phi*) (least squares over
  the test set, `mean_predictor_hermite` of summary.json); the cavity's are the target minus its
  fixed point's residual, 1 - b and eps - c (eps = -0.3), blog "Match the residual".
Usage: python3 examples/cavity_overlay_table.py RUNS
"""
import csv
import json
import os
import sys


def fraction_beyond(run_dir, cut):
    rows = list(csv.DictReader(open(os.path.join(run_dir, "histogram_rho.csv"))))
    total = sum(int(r["count"]) for r in rows)
    beyond = sum(int(r["count"]) for r in rows
                 if float(r["bin_low"]) >= cut or float(r["bin_high"]) <= -cut)
    return beyond / total


def main(runs):
    eps = -0.3
    print("| σ² | source | R | outliers (of 88) | side mass | test MSE of the mean predictor | He1 | He3 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for t in ["0.1", "0.18", "0.3"]:
        cav = json.load(open(os.path.join(runs, f"cavity{t}.json")))["unaligned"]
        print(f"| {t} | cavity ({cav['phase']['label']}) | {cav['r']:.4f} | {cav['outliers']:.2f} | "
              f"{cav['phase']['side_mass']:.3g} | {cav['test_mse']:.4f} | {1 - cav['b']:.4f} | {eps - cav['c']:.4f} |")
        for start in ["cold", "hot"]:
            run = os.path.join(runs, f"s{t}-{start}")
            if not os.path.exists(os.path.join(run, "summary.json")):
                print(f"| {t} | Langevin, {start} | not run | | | | | |")
                continue
            s = json.load(open(os.path.join(run, "summary.json")))
            he = s.get("mean_predictor_hermite") or [float("nan")] * 4
            print(f"| {t} | Langevin, {start} | {s['r_overlap2']:.4f} ± {s['r_overlap2_err']:.4f} | "
                  f"{s['outliers_layer1']:.2f} ± {s['outliers_layer1_err']:.2f} | "
                  f"{fraction_beyond(run, 0.5):.4f} | {s['test_mse_mean_predictor']:.4f} | "
                  f"{he[1]:.4f} | {he[3]:.4f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/overlay")
