"""Training as a fit engine: ``treegen fit DATA --algo efti --engine device --target T [--port URL]``.

:func:`device_inducer` returns an inducer with the signature of :func:`treegen.learn.engine.induce`
(``induce(X, y, n_classes, params, *, seed, callback) -> (tree, info)``) that trains on a device: the
firmware harness with the C EFTI engine (rows compiled into flash) is built and started for an emulated
or native target, or the device at ``port`` is used (rows streamed to its RAM buffer, or its flash rows
when they have the data's shape); the device runs ``params.max_iter`` iterations; its best tree is read
back (TREE_GET) and checked against the host engine (``treegen.learn.engine.induce``) with the same seed:
the same tree and the same integer fitness, else :class:`TreegenError`. The estimator then builds the
model from the device's tree exactly as for ``--engine native`` (scaling, classes, metadata).

The learn layer never imports this module: the CLI passes the inducer as the estimator's ``engine``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.device.train_hil import TrainingClient, build_train_firmware, device_tree


def _stump(Xq: np.ndarray, y: np.ndarray):
    """The inference model the harness also serves (the firmware needs one; a depth-1 CART tree)."""
    from treegen.learn.estimators import CARTClassifier

    return CARTClassifier(max_depth=1).fit(Xq, y).model_


def device_inducer(target, *, port: str | None = None, timeout: float = 30.0, build_dir=None, log=None):
    """An EFTI inducer that trains on ``target`` (see the module docstring). ``log(message)`` gets progress
    lines; ``inducer.report`` holds the device figures of the last run."""
    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    say = log or (lambda m: None)

    def induce(X, y, n_classes, params, *, seed: int = 0, callback=None, risk: str = "empirical",
               vicinity_sigma2: float | None = None):
        from treegen.device import train_firmware as tf
        from treegen.device.hil import open_device
        from treegen.learn import engine
        from treegen.learn import vicinal as vicinal_risk
        from treegen.learn.inducers.efti import check_inputs

        X01, Xq, y = check_inputs(X, y)
        Xq = Xq.astype(np.int64)
        n, A = Xq.shape
        C = int(n_classes)
        params = params.validate()
        vicinal = vicinal_risk.check_risk(risk) == "vicinal"
        sigma2 = float(vicinal_risk.DEFAULT_SIGMA2 if vicinity_sigma2 is None else vicinity_sigma2) if vicinal else 0.0
        risk_kw = {"risk": "vicinal", "vicinity_sigma2": sigma2} if vicinal else {}
        scale = n * float(1 << (48 if vicinal else 32))
        if params.max_iter < 1:
            raise TreegenError("--engine device needs --max-iter >= 1")
        with tempfile.TemporaryDirectory(prefix="treegen-fit-device-") as tmp:
            fw = None
            source = "ram"
            if port is None:
                spec = tf.make_train_spec(tgt, params, flash_data=(Xq, y, C), flash_source="fit data", **risk_kw)
                out = Path(build_dir) if build_dir is not None else Path(tmp) / "firmware"
                say(f"building the training firmware for {tgt.name}")
                fw = build_train_firmware(_stump(Xq, y), tgt, out, spec)
                source = "flash" if fw.spec.flash_rows else "ram"      # AVR: rows in the RAM buffer
                say(f"engine: {tf.mode_name(fw.spec)}"
                    + ("" if fw.ram_bytes is None else f"; RAM {fw.ram_bytes} of {tgt.ram_bytes} bytes, "
                       f"flash {fw.flash_bytes} of {tgt.flash_bytes} bytes"))
            t0 = time.perf_counter()
            with open_device(tgt, firmware=fw, port=port, timeout=timeout) as dev:
                tc = TrainingClient(dev.client)
                tc.check_capability()
                ti = tc.info()
                want = tf.params_digest(params, risk=risk, vicinity_sigma2=sigma2).hex()
                if ti.params_digest != want or ti.max_depth != params.max_depth:
                    raise TreegenError(f"{tc.name}: the device's engine was generated for other EFTI parameters "
                                       f"(digest {ti.params_digest}, depth {ti.max_depth}; these give {want}, "
                                       f"depth {params.max_depth})")
                if port is not None:
                    if ti.has_flash_data and (ti.flash_rows, ti.flash_attr) == (n, A):
                        source = "flash"
                    elif vicinal:
                        raise TreegenError(f"{tc.name}: vicinal-risk training on the device needs these rows in "
                                           f"its flash (treegen flash ... --train --risk vicinal --data CSV)")
                if source == "ram":
                    say(f"streaming {n} rows x {A} attributes to {tc.name}")
                    tc.send_data(Xq, y, C)
                say(f"training on {tc.name}: seed {seed}, {params.max_iter} iterations (rows in {source})")
                res = tc.train(seed, params.max_iter, n, source=source)
                tree = device_tree(tc.tree(C), X01, y)
            seconds = time.perf_counter() - t0
        say("checking against the host engine (same seed)")
        t_host, info = engine.induce(X01, y, C, params, seed=seed, **risk_kw)
        if not (tree.equals(t_host) and res.fitness == int(info["fitness_int"]) and res.iterations == params.max_iter):
            raise TreegenError(f"{tgt.name}: the device's tree differs from the host engine's with the same seed "
                               f"(fitness {res.fitness / scale:.6f} on the device, "
                               f"{int(info['fitness_int']) / scale:.6f} on the host; exact integers "
                               f"{res.fitness} and {info['fitness_int']})")
        info = dict(info)
        info.update({"engine": "device", "device_target": tgt.name, "elapsed_s": round(seconds, 4),
                     "device_counter_per_iteration": round(res.per_iteration, 1),
                     "device_counter_unit": res.unit_name, "device_source": source,
                     "device_partial": bool(ti.partial), "device_dsp": bool(ti.dsp), "device_variant": ti.variant,
                     "host_check": "identical tree and integer fitness"})
        induce.report = info
        if callback is not None:
            callback(res.iterations, res.fitness / scale, tree.n_leaves, res.hits / n)
        return tree, info

    induce.report = None
    induce.target = tgt.name
    return induce
