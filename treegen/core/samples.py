"""The datasets shipped inside the package (``sample_data/``: veh, pid, irs; UCI, CC BY 4.0), so a
quickstart runs from a plain ``pip install`` with no download and no network at test time.

``treegen dataset NAME -o FILE`` writes one; :func:`sample_path` gives the packaged file and
:func:`load_sample` reads it as a :class:`~treegen.core.data.Dataset`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from treegen.core.errors import TreegenError

_DIR = Path(__file__).resolve().parent / "sample_data"


@dataclass(frozen=True)
class Sample:
    name: str
    rows: int
    features: int
    classes: int
    title: str

    @property
    def description(self) -> str:
        return f"{self.rows} rows, {self.features} attributes, {self.classes} classes ({self.title}, UCI, CC BY 4.0)"


#: name -> what it is (checked against the file by the tests)
SAMPLES = {s.name: s for s in (
    Sample("veh", 846, 18, 4, "Statlog vehicle silhouettes"),
    Sample("pid", 768, 8, 2, "Pima Indians diabetes"),
    Sample("irs", 150, 4, 3, "iris"),
)}


def sample(name: str) -> Sample:
    """The shipped dataset ``name``; an unknown name is a one-line error listing the others."""
    try:
        return SAMPLES[name]
    except KeyError:
        raise TreegenError(f"no shipped dataset {name!r} (shipped: {', '.join(SAMPLES)})") from None


def sample_path(name: str) -> Path:
    """The packaged gzip CSV of the shipped dataset ``name``."""
    path = _DIR / f"{sample(name).name}.csv.gz"
    if not path.is_file():
        raise TreegenError(f"shipped dataset {name!r} is missing from the installation ({path.name})")
    return path


def load_sample(name: str):
    """The shipped dataset ``name`` as a :class:`~treegen.core.data.Dataset` (features ``a0, a1, ...``,
    labels the 1-based classes)."""
    from treegen.core.data import load_csv

    return load_csv(sample_path(name))
