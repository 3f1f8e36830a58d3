"""The Python front equals the CLI: same inputs, same JSON; bad input raises ValueError."""

import json
import os
import shutil
import subprocess

import pytest

import flscale

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def cli(*args):
    exe = os.environ.get("FLSCALE_BIN") or shutil.which("flscale")
    if exe is None:
        pytest.skip("the flscale binary is not built (set FLSCALE_BIN)")
    out = subprocess.run([exe, *args], capture_output=True, text=True)
    return out


def cli_json(*args):
    out = cli(*args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", [n for n, _ in flscale.presets()])
def test_predict_equals_cli(name):
    assert flscale.predict(name) == cli_json("predict", "--preset", name, "--json")


def test_predict_with_regime_and_dict():
    py = flscale.predict("fcn3-erf-he3", at={"N1": "d^2"})
    assert py == cli_json("predict", "--preset", "fcn3-erf-he3", "--at", "N1=d^2", "--json")
    assert "GP-Sp" in py["winners"] and "Sp-Mag" not in py["winners"]
    arch = {"network": {"kind": "fcn", "activation": "erf", "widths": ["N"]},
            "target": {"hermite": 3}, "regime": {"N": "d"}}
    r = flscale.predict(arch)
    assert r["p_star_exponent"] == "1"
    sp = next(p for p in r["patterns"] if p["name"] == "Sp")
    assert sp["terms"] == {"Delta_1": "M*d", "a_y": "N/M"}
    assert isinstance(sp["exponent_float"], float)


def test_predict_from_file_and_text(tmp_path):
    text = flscale.preset_toml("fcn2-erf-he3")
    f = tmp_path / "arch.toml"
    f.write_text(text)
    # The same prediction; only `source` says where each came from.
    def without_source(r):
        return {k: v for k, v in r.items() if k != "source"}
    from_file = flscale.predict(str(f))
    assert from_file["source"] == str(f)
    assert flscale.predict("fcn2-erf-he3")["source"] == "preset fcn2-erf-he3"
    assert without_source(from_file) == without_source(flscale.predict("fcn2-erf-he3"))
    assert without_source(flscale.predict(f)) == without_source(flscale.predict(text))


def test_energy_equals_cli():
    py = flscale.energy("M*d + N/M", free=["M"], at={"N": "d^(1/2)"}, constraints=["1<=M<=N"])
    assert py == cli_json("energy", "M*d + N/M", "--free", "M", "--constraint", "1<=M<=N",
                          "--at", "N=d^(1/2)", "--json")
    assert py["binding"] == ["1 <= M"]
    assert py["exponent"] == "1" and py["exponent_float"] == 1.0


def test_bad_input_raises_value_error_with_the_cli_message():
    with pytest.raises(ValueError, match="column 5"):
        flscale.energy("M*d - N", free=["M"])
    # Issue 40: Python's power operator gets the hint the CLI gives.
    with pytest.raises(ValueError, match=r'not \*\*: "M\^2\*d"'):
        flscale.energy("M**2*d", free=["M"])
    with pytest.raises(ValueError, match="fcn3-erf-he3"):
        flscale.predict("no-such-preset")
    with pytest.raises(ValueError, match="network.activation"):
        flscale.predict({"network": {"kind": "fcn", "activation": "softplus", "widths": ["N"]},
                         "target": {"hermite": 3}})
    out = cli("predict", "--preset", "no-such-preset")
    assert out.returncode == 2
    with pytest.raises(ValueError) as e:
        flscale.predict("no-such-preset")
    assert str(e.value) == out.stderr.strip().removeprefix("error: ")


def test_predict_names_why_no_pattern_reaches_an_even_target():
    # Issue 40: an erf network on He2 (erf is odd) has no finite pattern; the JSON says why.
    arch = {"network": {"kind": "fcn", "activation": "erf", "widths": ["N"]},
            "target": {"hermite": 2}, "regime": {"N": "d"}}
    r = flscale.predict(arch)
    assert r["winners"] == [] and r["p_star_exponent"] is None
    assert "even order vanish" in r["no_winner_reason"]
    assert r["no_winner_reason"] in r["reading"]


def test_predict_tells_winners_and_the_paper_rows_apart():
    r = flscale.predict("fcn3-erf-he3")
    assert r["paper_table"] == "Table 1"
    assert r["paper_patterns"] == ["GP-GP", "GP-Sp", "Sp-Mag"]
    assert set(r["simplest_winners"]) <= set(r["winners"])
    assert len(r["simplest_winners"]) < len(r["winners"])
    for p in r["patterns"]:
        assert p["paper"] == (p["name"] in r["paper_patterns"])
        assert p["paper_kind"] == ("[" not in p["name"] and "muSp" not in p["name"])


def test_dict_errors_name_the_key_not_a_position():
    # Issue 40: the TOML written from a dict is never seen by the caller; "line 1, column 1"
    # pointed into it. The key is named instead.
    with pytest.raises(ValueError) as e:
        flscale.predict({"network": {"kind": "fcn", "activation": "erf", "widths": ["N"],
                                     "depth": 3}, "target": {"hermite": 3}})
    assert "line" not in str(e.value) and "column" not in str(e.value)
    assert "network" in str(e.value) and "depth" in str(e.value)
    with pytest.raises(ValueError) as e:
        flscale.predict({"target": {"hermite": 3}})
    assert "line" not in str(e.value) and "network" in str(e.value)
    bad = json.loads(json.dumps(SMALL))
    bad["sampler"]["steps"] = "many"
    with pytest.raises(ValueError) as e:
        flscale.sample(bad)
    assert "line" not in str(e.value) and "sampler.steps" in str(e.value)


def test_dir_lists_the_public_api_only():
    # Issue 40: dir(flscale) listed Any, Dict, json, os.
    names = set(dir(flscale))
    assert {"predict", "energy", "sample", "sweep", "load_results", "cavity"} <= names
    assert not names & {"Any", "Dict", "json", "os", "Mapping", "_native"}
    for module in (flscale.cavity, flscale.ldt, flscale.kernel):
        assert set(dir(module)) == set(module.__all__)


def test_presets_and_docstrings():
    names = dict(flscale.presets())
    assert {"fcn2-erf-he3", "fcn3-erf-he3", "cnn-patches", "attention-softmax"} <= set(names)
    for fn in (flscale.predict, flscale.energy, flscale.presets, flscale.preset_toml):
        assert "Example" in fn.__doc__


SMALL = {
    "model": {"kind": "fcn", "activation": "erf", "widths": [10]},
    "data": {"d": 10, "p": 40, "n_test": 200},
    "target": {"hermite": 3},
    "sampler": {"kappa": 1.0, "step": 1e-3, "steps": 300, "burn_in": 100, "thin": 20,
                "chains": 4, "seed": 3},
}


def test_sample_returns_numpy_arrays_and_equals_cli(tmp_path):
    import numpy as np

    r = flscale.sample(SMALL)
    n_samples = 300 // 20
    assert r["trace"]["alignment"].shape == (n_samples,)
    assert r["trace"]["alignment"].dtype == np.float64
    assert r["trace"]["burn_in"].dtype == np.bool_
    assert r["chains"]["alignment"].shape == (4,)
    assert r["histogram"]["counts"].dtype == np.uint64
    assert r["histogram"]["edges"].shape == (r["histogram"]["counts"].shape[0] + 1,)
    assert r["mean_test_prediction"].shape == (200,)
    assert np.isfinite(r["alignment"])
    # Same experiment through the CLI: the deterministic summary agrees.
    import tomllib  # noqa: F401  (Python >= 3.11; the file is written by hand below)
    lines = []
    for section, fields in SMALL.items():
        lines.append(f"[{section}]")
        for k, v in fields.items():
            lines.append(f"{k} = {json.dumps(v)}")
    f = tmp_path / "exp.toml"
    f.write_text("\n".join(lines) + "\n")
    cli_summary = cli_json("sample", str(f), "--out", str(tmp_path / "out"), "--json")
    for key in ("alignment", "alignment_err", "test_mse", "train_mse", "outliers_layer1", "r_overlap2"):
        assert r[key] == cli_summary[key], key
    assert flscale.sample(str(f))["alignment"] == r["alignment"]


def test_sample_bad_input():
    bad = json.loads(json.dumps(SMALL))
    bad["sampler"]["step"] = -1.0
    with pytest.raises(ValueError, match="sampler.step"):
        flscale.sample(bad)


def test_sample_refuses_what_does_not_fit_before_it_runs():
    # 100 chains at d = 10^6 (8·10^6 weights each): the weights and gradients (with the default MALA's proposal) are 12.8 GB.
    huge = json.loads(json.dumps(SMALL))
    huge["data"]["d"] = 1_000_000
    huge["model"]["widths"] = [8]
    huge["sampler"]["chains"] = 100
    with pytest.raises(ValueError, match=r"needs about .* GB of memory but 4.0 GB is available \(max_memory\)"):
        flscale.sample(huge, max_memory="4G")
    with pytest.raises(ValueError, match="max_memory = .lots. is not allowed"):
        flscale.sample(SMALL, max_memory="lots")


def test_all_chains_diverged_is_a_runtime_error():
    bad = json.loads(json.dumps(SMALL))
    # Divergence is unadjusted Langevin's failure at a fixed step; the default sampler
    # (Metropolis-adjusted, adapted) rejects such proposals instead.
    bad["sampler"].update({"step": 10.0, "mala": False, "adapt_step": False})
    with pytest.raises(RuntimeError, match="diverged"):
        flscale.sample(bad)


def test_cavity_equals_cli():
    py = flscale.cavity.phase(sigma_w2=1.0, b=0.3, c=-0.3)
    assert py == cli_json("cavity", "phase", "--sigma-w2", "1", "--b", "0.3", "--c", "-0.3", "--json")
    assert abs(py["u_spinodal"]["u"] - 25 * 3.141592653589793 / 3) < 1e-9
    solved = flscale.cavity.solve(p=40, p_test=200)
    assert solved == cli_json("cavity", "solve", "--p", "40", "--p-test", "200", "--json")


def test_cavity_potential_shapes_and_errors():
    import numpy as np

    rho = np.linspace(-1.5, 1.5, 31)
    mf = flscale.cavity.potential(rho, sigma_w2=1.0, b=0.3, c=-0.3, u=22.0)
    assert mf.shape == (31,) and mf.dtype == np.float64
    assert mf[15] == 0.0  # U(0) = 0
    fin = flscale.cavity.potential(rho, sigma_w2=1.0, p=100)
    assert fin.shape == (31,) and np.all(np.isfinite(fin))
    with pytest.raises(ValueError, match="sigma|σ"):
        flscale.cavity.phase(sigma_w2=-1.0)
    with pytest.raises(ValueError):
        flscale.cavity.potential(rho)


def test_ctrl_c_interrupts_a_long_sample():
    import signal

    long_run = json.loads(json.dumps(SMALL))
    long_run["sampler"].update({"steps": 10_000_000, "burn_in": 100, "thin": 100})
    # SIGINT from outside the interpreter, as a terminal's Ctrl-C arrives. (A Python timer
    # thread raising it needs the GIL first, which the sampler's main thread, re-attaching
    # every 100 steps to check for signals, can keep winning: that version of this test was
    # flaky once the sampler got fast.)
    # A shell's background job (`cmd &`) inherits SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: install it, as an interactive session has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killer = subprocess.Popen(
        ["sh", "-c", f"sleep 1; kill -{int(signal.SIGINT)} {os.getpid()}"]
    )
    try:
        with pytest.raises(KeyboardInterrupt):
            flscale.sample(long_run)
    finally:
        killer.wait()
        signal.signal(signal.SIGINT, previous)


def test_ldt_rate_equals_cli():
    py = flscale.ldt.rate(alpha=[0.5, 1.0], d=10, n=10)
    cli_out = cli_json("ldt", "rate", "--alpha", "0.5,1", "--d", "10", "--n", "10", "--json")
    assert py["points"] == cli_out["points"]
    assert py["model"] == cli_out["model"]
    with pytest.raises(ValueError):
        flscale.ldt.rate(d=-1)


def test_kernel_propagate_equals_cli_up_to_timing():
    py = flscale.kernel.propagate("quick")
    cli_out = cli_json("kernel", "propagate", "--quick", "--json")
    for key in set(py) - {"timing"}:
        assert py[key] == cli_out[key], key
    with pytest.raises(ValueError, match="quick, fig5, fig6"):
        flscale.kernel.propagate("huge")


def small_sweep_file(tmp_path):
    """SMALL with a two-point sweep over P, as an experiment file."""
    exp = tmp_path / "exp.toml"
    lines = []
    for section, fields in SMALL.items():
        lines.append(f"[{section}]")
        for k, v in fields.items():
            lines.append(f"{k} = {json.dumps(v)}")
    lines += ["[sweep]", "data.p = [20, 40]"]
    exp.write_text("\n".join(lines) + "\n")
    return exp


def test_load_results_reads_a_sweep(tmp_path):
    exp = small_sweep_file(tmp_path)
    out = cli("sweep", str(exp), "--out", str(tmp_path / "sw"), "-q")
    assert out.returncode == 0, out.stderr
    # The same sweep from Python gives the same results file; a second call resumes (no work).
    outcome = flscale.sweep(exp, tmp_path / "py")
    assert outcome["computed"] == 2 and outcome["finished"] == 2
    assert flscale.sweep(str(exp), tmp_path / "py")["computed"] == 0
    parquet = (tmp_path / "sw" / "results.parquet").read_bytes()
    assert parquet[:4] == b"PAR1" and parquet[-4:] == b"PAR1"
    assert (tmp_path / "py" / "results.parquet").read_bytes() == parquet
    cols = flscale.load_results(tmp_path / "sw")
    assert "observable" in cols and "value" in cols
    n = len(cols["value"])
    assert n > 0 and all(len(v) == n for v in cols.values())
    assert all(isinstance(i, int) for i in cols["index"])
    align = [v for o, v in zip(cols["observable"], cols["value"]) if o == "alignment"]
    assert len(align) == 2 and all(isinstance(a, float) for a in align)
    # Issue 40: integer parameters as int (pandas: int64, not d = 6.0), the swept field
    # data.p once (as p), yes/no columns as bool or None (not empty strings).
    for name in ("d", "p", "n1", "seed"):
        assert all(type(x) is int for x in cols[name]), name
    assert sorted(set(cols["p"])) == [20, 40] and set(cols["d"]) == {10}
    assert "data.p" not in cols
    assert isinstance(cols["kappa"][0], float)
    for name in ("starts_agree", "equilibrated"):
        assert all(x is None or type(x) is bool for x in cols[name]), name
    # The CSV store of the same sweep holds the same table.
    assert flscale.sweep(exp, tmp_path / "csv", format="csv")["computed"] == 2
    assert not (tmp_path / "csv" / "results.parquet").exists()
    assert flscale.load_results(tmp_path / "csv") == cols
    with pytest.raises(ValueError, match="parquet"):
        flscale.sweep(exp, tmp_path / "x", format="feather")
    with pytest.raises(ValueError, match="flscale sweep"):
        flscale.load_results(tmp_path / "nothing-here")


def test_load_results_refuses_a_damaged_run_or_skips_it(tmp_path):
    exp = small_sweep_file(tmp_path)
    flscale.sweep(exp, tmp_path / "sw")
    whole = flscale.load_results(tmp_path / "sw")
    chains = tmp_path / "sw" / "runs" / "run-00001" / "chains.csv"
    text = chains.read_text().splitlines()
    cells = text[1].split(",")
    cells[2] = "NaN"
    text[1] = ",".join(cells)
    chains.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match="run-00001"):
        flscale.load_results(tmp_path / "sw")
    with pytest.warns(UserWarning, match="run-00001"):
        cols = flscale.load_results(tmp_path / "sw", skip_damaged=True)
    assert set(cols["run"]) == {"run-00000"}
    assert len(cols["value"]) == len(whole["value"]) // 2


def test_results_parquet_is_read_by_pyarrow_as_load_results_reads_it(tmp_path):
    # An independent Parquet reader (the one pandas.read_parquet uses); scripts/test-all.sh
    # installs it, elsewhere the test is skipped.
    pq = pytest.importorskip("pyarrow.parquet")
    exp = small_sweep_file(tmp_path)
    flscale.sweep(exp, tmp_path / "sw")
    ours = flscale.load_results(tmp_path / "sw")
    for name in ("results", "chains", "histograms"):
        table = pq.read_table(tmp_path / "sw" / f"{name}.parquet")
        assert table.num_rows > 0, name
        if name == "results":
            # The stored table holds the integers and booleans load_results gives; only the
            # swept field's own column (data.p beside p) is left out of load_results.
            raw = table.to_pydict()
            assert raw["data.p"] == raw["p"] and "data.p" not in ours
            for col, values in ours.items():
                assert raw[col] == values, col
            assert str(table.schema.field("value").type) == "double"
            assert str(table.schema.field("run").type) == "string"
            for col in ("d", "p", "n1", "seed"):
                assert str(table.schema.field(col).type) == "int64", col
            for col in ("starts_agree", "equilibrated"):
                assert str(table.schema.field(col).type) == "bool", col


FREE_ENERGY_EXAMPLE = os.path.join(ROOT, "examples", "experiments", "free-energy-sign.toml")


def test_free_energy_returns_numpy_profile_and_resumes(tmp_path):
    import numpy as np

    out = tmp_path / "fe"
    r = flscale.free_energy(FREE_ENERGY_EXAMPLE, out=out, quick=True, replicates=20)
    s, f, f_err = r["profile"]["s"], r["profile"]["F"], r["profile"]["F_err"]
    assert isinstance(s, np.ndarray) and s.dtype == np.float64 and s.shape == f.shape == f_err.shape
    assert len(s) >= 10 and np.isfinite(f).sum() >= 10
    assert isinstance(r["basins"], list) and r["basins"]
    assert abs(sum(b["weight"] for b in r["basins"]) - 1.0) < 1e-9
    assert set(r["observables"]) == {"alignment", "test_mse", "outliers"}
    assert len(os.listdir(out / "windows")) == 16
    assert (out / "free_energy.svg").exists() and (out / "profile.csv").exists()
    # The rerun reads the kept windows: the same numbers, the files untouched.
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "windows").iterdir()}
    again = flscale.free_energy(FREE_ENERGY_EXAMPLE, out=out, quick=True, replicates=20)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "windows").iterdir()} == stamps
    assert again["basins"] == r["basins"]
    assert np.array_equal(again["profile"]["F"], f, equal_nan=True)


def test_free_energy_bad_table_is_a_value_error():
    with open(FREE_ENERGY_EXAMPLE, encoding="utf-8") as fh:
        text = fh.read()
    with pytest.raises(ValueError, match="free_energy.neuron = 5 is out of range"):
        flscale.free_energy(text.replace("neuron = 0", "neuron = 5"), quick=True)
    with pytest.raises(ValueError, match="has no \\[free_energy\\] table"):
        flscale.free_energy(text[: text.index("[free_energy]")], quick=True)
