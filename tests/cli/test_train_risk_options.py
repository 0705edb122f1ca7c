"""``--risk`` / ``--vicinity-sigma2`` of ``hil --train``, ``build/flash --train`` and ``export --train``
(issue 26): wrong combinations are one-line errors with exit 2, before anything is built."""

from __future__ import annotations

import pytest
from conftest import load_shared, run_cli

from treegen import CARTClassifier, save


@pytest.fixture
def irs_files(tmp_path):
    X, y = load_shared("irs")
    data = tmp_path / "irs.csv"
    rows = [",".join(map(str, r)) + f",{c}" for r, c in zip(X.tolist(), y.tolist())]
    data.write_text("a0,a1,a2,a3,class\n" + "\n".join(rows) + "\n")
    model = tmp_path / "m.json"
    save(CARTClassifier(max_depth=1).fit(X, y).model_, model)
    return model, data


@pytest.mark.parametrize("argv, message", [
    (["hil", "{m}", "--target", "qemu-m4", "--data", "{d}", "--risk", "vicinal"],
     "--risk and --vicinity-sigma2 go with --train"),
    (["hil", "{m}", "--target", "qemu-m4", "--data", "{d}", "--train", "--vicinity-sigma2", "0.2"],
     "--vicinity-sigma2 goes with --risk vicinal"),
    (["build", "{m}", "--target", "qemu-m4", "--risk", "vicinal"], "only apply with --train"),
    (["build", "{m}", "--target", "qemu-m4", "--train", "--data", "{d}", "--vicinity-sigma2", "0.2"],
     "--vicinity-sigma2 goes with --risk vicinal"),
    (["export", "{m}", "--target", "cortex-m4", "--risk", "vicinal"],
     "--risk and --vicinity-sigma2 of export go with --train"),
    (["export", "{d}", "--train", "--target", "cortex-m4", "--vicinity-sigma2", "0.2"],
     "--vicinity-sigma2 goes with --risk vicinal"),
    (["export", "{m}", "--train", "--target", "cortex-m4", "--max-rows", "150", "--risk", "vicinal"],
     "vicinal-risk training on the device needs the rows in flash"),
])
def test_risk_option_errors(irs_files, tmp_path, capsys, argv, message):
    m, d = irs_files
    args = [a.format(m=m, d=d) for a in argv] + ["-o", str(tmp_path / "out")]
    code, out, err = run_cli(capsys, args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("treegen: error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()
