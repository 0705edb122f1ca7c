"""The C EFTI engine (templates/efti) == the Python EFTI, bit for bit; strict C; bad input."""

import shutil
import subprocess

import numpy as np
import pytest
from conftest import load_shared

from treegen import EFTIClassifier, TreegenError
from treegen.learn import engine
from treegen.learn.inducers import efti
from treegen.learn.inducers.efti import EFTIParams


def _data(name):
    X, y = load_shared(name)
    classes, y_idx = np.unique(y, return_inverse=True)
    return X / 32768.0, y_idx.astype(np.int64), len(classes)


CASES = [
    ("veh", 6000, 1, {}),
    ("veh", 6000, 2, {"partial_reclassification": False}),
    ("seg", 4000, 3, {"dipole": "node"}),
    ("gls", 5000, 4, {"missing_weight": 0.3, "oversize_weight": 0.02}),
    ("irs", 3000, 5, {"coefficient_mutation_rate": 0.05}),
    ("pid", 3000, 6, {"max_depth": 3, "oversize_weight": 0.0}),
    ("son", 2000, 7, {"search_probability": 0.2, "search_probability_raise": 1e-3,
                      "return_to_best_probability": 0.01}),
    ("bcw", 3000, 8, {"max_depth": 1}),
    # attribute sampling per node (TG_EFTI_NODE_SAMPLING): partial + window, and the lean build
    ("gls", 3000, 9, {"node_features": 3}),
    ("irs", 2000, 10, {"node_features": 2, "dipole": "node", "coefficient_mutation_rate": 0.1,
                       "partial_reclassification": False}),
]


@pytest.mark.parametrize("name, iters, seed, kw", CASES)
def test_native_engine_evolves_the_identical_tree(name, iters, seed, kw):
    X, y, C = _data(name)
    p = EFTIParams(max_iter=iters, **kw)
    t_py, i_py = efti.induce(X, y, C, p, seed=seed)
    t_c, i_c = engine.induce(X, y, C, p, seed=seed)
    assert t_c.equals(t_py)
    assert i_c["fitness_int"] == i_py["fitness_int"]
    assert i_c["iterations"] == iters


def test_partial_reclassification_runs_in_c_and_changes_nothing():
    X, y, C = _data("seg")
    a, ia = engine.induce(X, y, C, EFTIParams(max_iter=5000, partial_reclassification=True), seed=9)
    b, ib = engine.induce(X, y, C, EFTIParams(max_iter=5000, partial_reclassification=False), seed=9)
    assert a.equals(b)
    # both builds re-evaluate only the rows under changed nodes (the lean build re-routes them from the root,
    # the partial one from the memorised projections), so the same fraction of rows
    assert ia["rerouted_fraction"] == ib["rerouted_fraction"] < 0.9


def test_estimator_engines_agree_and_auto_picks_native():
    X, y = load_shared("pid")
    a = EFTIClassifier(max_iter=2000, random_state=3, engine="python").fit(X, y)
    b = EFTIClassifier(max_iter=2000, random_state=3, engine="native").fit(X, y)
    c = EFTIClassifier(max_iter=2000, random_state=3).fit(X, y)
    assert a.tree_.equals(b.tree_) and b.tree_.equals(c.tree_)
    assert b.model_.metadata["engine"] == "native"
    assert c.model_.metadata["engine"] == "native"      # a C compiler is part of the setup
    with pytest.raises(TreegenError, match="unknown EFTI engine"):
        EFTIClassifier(engine="gpu").fit(X, y)


def test_estimator_max_features_samples_per_node_in_both_engines():
    X, y = load_shared("gls")
    a = EFTIClassifier(max_iter=1500, max_features="sqrt", random_state=5, engine="python").fit(X, y)
    b = EFTIClassifier(max_iter=1500, max_features="sqrt", random_state=5, engine="native").fit(X, y)
    assert a.tree_.equals(b.tree_)
    assert all(np.count_nonzero(a.tree_.weights[j]) <= 3 for j in np.flatnonzero(a.tree_.left >= 0))
    assert not a.tree_.equals(EFTIClassifier(max_iter=1500, random_state=5).fit(X, y).tree_)
    with pytest.raises(TreegenError, match="python and native engines only"):
        EFTIClassifier(max_iter=10, max_features=2, engine=engine.induce).fit(X, y)


def test_callback_from_native_engine():
    X, y, C = _data("irs")
    seen = []
    engine.induce(X, y, C, EFTIParams(max_iter=3000), seed=1, callback=lambda *a: seen.append(a))
    assert seen[0][0] == 0 and seen[-1][0] == 3000
    assert all(b[1] >= a[1] for a, b in zip(seen, seen[1:]))


def test_bad_input_is_rejected_with_a_clear_error():
    X, y, C = _data("irs")
    with pytest.raises(TreegenError, match="two classes"):
        engine.induce(X, np.zeros_like(y), C, EFTIParams(max_iter=10))
    with pytest.raises(TreegenError, match="Q15 grid"):
        engine.induce(X + 1e-7, y, C, EFTIParams(max_iter=10))
    with pytest.raises(TreegenError, match="max_iter"):
        engine.induce(X, y, C, EFTIParams(max_iter=-1))


def test_node_sampling_build_compiles_strictly_for_cortex_m4(tmp_path):
    cc = shutil.which("arm-none-eabi-gcc")
    assert cc, "arm-none-eabi-gcc is required (scripts/setup.sh installs it)"
    sources = engine.render_engine(engine.engine_sizes(512, 18, 4, 5, node_sampling=True))
    assert "node_features" in sources["tg_efti.h"]
    assert "node_features" not in engine.render_engine(engine.engine_sizes(512, 18, 4, 5))["tg_efti.h"]
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
    res = subprocess.run([cc, "-mcpu=cortex-m4", "-mthumb", "-Os", *engine.STRICT_FLAGS, "-c",
                          str(tmp_path / "tg_efti.c"), "-o", str(tmp_path / "tg_efti.o")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("cpu, variant", [("cortex-m0plus", "scalar"), ("cortex-m3", "scalar"), ("cortex-m4", "dsp"),
                                          ("cortex-m7", "dsp"), ("cortex-m33", "dsp"), ("cortex-m55", "dsp"),
                                          ("cortex-m55", "mve")])
def test_engine_compiles_strictly_for_cortex_m(tmp_path, cpu, variant):
    cc = shutil.which("arm-none-eabi-gcc")
    assert cc, "arm-none-eabi-gcc is required (scripts/setup.sh installs it)"
    sizes = dict(engine.engine_sizes(512, 18, 4, 5), dsp=variant == "dsp", mve=variant == "mve")
    for name, text in engine.render_engine(sizes).items():
        (tmp_path / name).write_text(text)
    abi = ["-mfloat-abi=hard"] if cpu == "cortex-m55" else []   # MVE needs the FP/vector registers
    res = subprocess.run([cc, f"-mcpu={cpu}", "-mthumb", *abi, "-Os", *engine.STRICT_FLAGS, "-c",
                          str(tmp_path / "tg_efti.c"), "-o", str(tmp_path / "tg_efti.o")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    if variant == "mve":                       # Helium instructions, not the portable emulation
        asm = subprocess.run([cc, f"-mcpu={cpu}", "-mthumb", *abi, "-Os", *engine.STRICT_FLAGS, "-S", "-o", "-",
                              str(tmp_path / "tg_efti.c")], capture_output=True, text=True)
        assert asm.returncode == 0 and "vmlaldava.s16" in asm.stdout and "vctp.16" in asm.stdout, asm.stderr


@pytest.mark.parametrize("name, seed", [("veh", 3), ("gls", 4)])
def test_mve_portable_emulation_evolves_the_identical_tree(monkeypatch, name, seed):
    """The mve variant's portable path (the host compiler has no Helium: templates/c/mve.c.j2's
    eight-lane emulation, tail vector zero-filled) evolves the scalar engine's tree; veh's 18
    attributes = two full vectors and a tail of two. Window off: the dot products devices run."""
    X, y, C = _data(name)
    p = EFTIParams(max_iter=1500)
    t_ref, i_ref = engine.induce(X, y, C, p, seed=seed)
    plain = engine.engine_sizes
    monkeypatch.setattr(engine, "engine_sizes", lambda *a, **k: dict(plain(*a, **k), mve=True, window=False))
    assert "#define TG_EFTI_MVE 1" in engine.render_engine(engine.engine_sizes(100, 18, 4, 3))["tg_efti.c"]
    t_mve, i_mve = engine.induce(X, y, C, p, seed=seed)
    assert t_mve.equals(t_ref) and i_mve["fitness_int"] == i_ref["fitness_int"]


WINDOW_CASES = [
    ("pid", 4000, 11, {}),
    ("veh", 3000, 12, {"topology_mutation_rate": 0.9, "return_to_best_probability": 0.01}),
    ("seg", 2000, 13, {"coefficient_mutation_rate": 0.1, "max_depth": 4}),
    ("irs", 3000, 14, {"dipole": "node", "search_probability": 0.3}),
]


@pytest.mark.parametrize("name, iters, seed, kw", WINDOW_CASES)
def test_host_window_build_equals_the_device_build(monkeypatch, name, iters, seed, kw):
    """The host build's sorted per-node row lists, count snapshots and SSE2 dot products (TG_EFTI_WINDOW)
    evolve the same tree, with the same statistics, as the build devices get (window off)."""
    X, y, C = _data(name)
    if name == "irs":                     # few rows: nodes with < 32 rows (the insertion-sort path)
        X, y = X[::4], y[::4]
    p = EFTIParams(max_iter=iters, **kw)
    assert engine.engine_sizes(X.shape[0], X.shape[1], C, p.max_depth)["window"]
    t_win, i_win = engine.induce(X, y, C, p, seed=seed)
    sizes = engine.engine_sizes
    monkeypatch.setattr(engine, "engine_sizes", lambda *a, **k: {**sizes(*a, **k), "window": False})
    t_dev, i_dev = engine.induce(X, y, C, p, seed=seed)
    assert t_win.equals(t_dev)
    assert (i_win["fitness_int"], i_win["rerouted_fraction"]) == (i_dev["fitness_int"], i_dev["rerouted_fraction"])
