"""Every size and count treegen accepts, in one place: the model file format (its writer and its
reader check the same numbers), the data readers, and the numeric options of the command line.

The bounds are far above any tree treegen builds or imports and any dataset of the field, and
inside what the exporters, the device protocol, int64 class counts, the engines' 32-bit counters
and the operating system's timers can represent. A value beyond a bound is refused with a message
that names the bound; counts of parallel workers are capped at the cores available instead (they
change no result). :func:`check_memory` refuses an allocation larger than the memory available.
"""

from __future__ import annotations

import os
import warnings

from treegen.core.errors import TreegenError

# ---------------------------------------------------------------------- the model file format
MAX_FEATURES = 65535          # feature indices fit uint16 on the device
MAX_CLASSES = 65535
MAX_TREES = 4096              # trees of an ensemble (--n-trees; the reader and the writer)
MAX_NODES = 1 << 20           # per tree
MAX_CELLS = 1 << 24           # n_nodes * n_features (weights) and n_nodes * n_classes (counts), per tree
MAX_DEPTH = 1024              # tests on the longest root-to-leaf path (--max-depth)
MAX_COUNT = 1 << 40           # one class count; a node total stays below 2**63 for MAX_CLASSES classes
MAX_NAME = 4096               # characters of a feature name or a string class label
MAX_LABEL_INT = (1 << 63) - 1
MAX_ABS_VALUE = 1e300         # weights, thresholds, offsets and scales: finite, products stay finite
MAX_META_DEPTH = 32           # nesting of the free-form metadata object
MAX_MODEL_BYTES = 1 << 30     # one model file (1 GiB of JSON)

# ---------------------------------------------------------------------- data files
MAX_DATA_BYTES = 1 << 30      # a data file, after gzip decompression (1 GiB of CSV text)
MAX_ROWS = (1 << 31) - 1      # data rows (the engines count rows in 32 bits)
MAX_COLUMNS = MAX_FEATURES + 1   # the features and the label column
MAX_TEXT_BYTES = 64 << 20     # a small text input: a parameters file, a JSON report (64 MiB)
MAX_TARGET = 1e150            # |regression target| a regressor fits: its sums of squares stay finite


def check_target_range(y, what: str = "target value", error=TreegenError) -> None:
    """Refuse regression targets beyond +-MAX_TARGET (the regressors square and sum them: a larger value
    overflows to inf and NaN, after pages of numpy warnings). ``y`` is a finite float64 array."""
    import numpy as np

    big = np.flatnonzero(np.abs(y) > MAX_TARGET)
    if big.size:
        raise error(f"{what} {float(y[big[0]]):g} (row {int(big[0]) + 1}) is beyond +-{MAX_TARGET:g}, where the "
                    "regressors' sums of squares overflow; rescale the target (e.g. divide it by a power of 10)")

# ---------------------------------------------------------------------- command-line counts
MAX_U32 = (1 << 32) - 1       # the engines' iteration and generation counters; --max-rows of on-device training
MAX_EFTI_DEPTH = 30           # EFTI's complete-tree node indices (2**(depth+1) - 1) fit 32 bits on the device
MAX_POPULATION = 100_000      # --population (DE-PDT, DE-split, GP); memory is checked as well
MAX_FOLDS = 10_000            # --folds (also bounded by the rows of each class)
MAX_REPEATS = 10_000          # --repeats of cv and compare
MAX_TIMEOUT = 86_400.0        # seconds (one day): every --timeout / --treegen-timeout


def bytes_text(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def memory_available() -> int:
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``; else physical pages
    free; 2**62 when neither is known)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 1 << 62


def check_memory(nbytes: float, what: str) -> None:
    """Refuse (:class:`TreegenError`) an allocation of ``nbytes`` for ``what`` larger than the memory
    available."""
    available = memory_available()
    if nbytes > available:
        raise TreegenError(f"{what} needs {bytes_text(nbytes)} of memory, more than the "
                           f"{bytes_text(available)} available")


def available_cores() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def capped_jobs(jobs: int, n_tasks: int) -> int:
    """``jobs`` (joblib's n_jobs: negative counts from the number of cores) limited to the cores
    available and to the number of tasks (folds, trees); a warning says when a request above the cores is capped."""
    cores = available_cores()
    wanted = jobs if jobs > 0 else max(1, cores + 1 + jobs)
    if wanted > cores:
        warnings.warn(f"jobs {jobs} capped at {cores} (the cores available)", UserWarning, stacklevel=3)
        wanted = cores
    return max(1, min(wanted, n_tasks))


def check_timeout(value, what: str = "timeout") -> float:
    """A finite number of seconds in (0, MAX_TIMEOUT] (the operating system's timers overflow past
    about 9.2e9 s; NaN would wait forever)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise TreegenError(f"{what} must be a number of seconds, got {value!r}") from None
    if not 0 < seconds <= MAX_TIMEOUT:      # False for NaN
        raise TreegenError(f"{what} must be more than 0 and at most {MAX_TIMEOUT:g} seconds (one day), "
                           f"got {value!r}")
    return seconds


CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
NUL = b"\0"


def read_bounded(stream, limit: int, what: str, error=TreegenError) -> bytes:
    """All bytes of the binary ``stream``, read once in chunks: an ``error`` naming
    ``what`` and the bound when there are more than ``limit``, or as soon as a chunk of what should
    be text (anything but a gzip stream) holds a NUL byte (``/dev/zero``, a binary file)."""
    parts, total, text = [], 0, None
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        if text is None:
            text = chunk[:2] != GZIP_MAGIC
        if text and NUL in chunk:
            raise error(f"{what} is not a text file (a NUL byte at offset {total + chunk.index(NUL)})")
        total += len(chunk)
        if total > limit:
            raise error(f"{what} is larger than {bytes_text(limit)}, the most treegen reads")
        parts.append(chunk)
    return b"".join(parts)


def gunzip_bounded(raw: bytes, limit: int, what: str, error=TreegenError) -> bytes:
    """``raw`` gzip data decompressed (concatenated members too), refused past ``limit`` bytes (a
    small file that decompresses to gigabytes) or when it holds a NUL byte; zlib errors propagate."""
    import zlib

    out, total, data = [], 0, raw
    while data:
        d = zlib.decompressobj(wbits=31)
        while True:
            piece = d.decompress(data, CHUNK)
            data = d.unconsumed_tail
            if NUL in piece:
                raise error(f"{what} is not a text file (a NUL byte at offset {total + piece.index(NUL)})")
            total += len(piece)
            if total > limit:
                raise error(f"{what} decompresses to more than {bytes_text(limit)}, the most treegen reads")
            out.append(piece)
            if d.eof or (not data and not piece):
                break
        if not d.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        data = d.unused_data.lstrip(NUL)
    return b"".join(out)


def read_text_file(path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the small input file ``path`` (a byte-order mark removed), read once with
    :func:`read_bounded`; ``FileNotFoundError`` and other ``OSError`` propagate, anything that is
    not text is a :class:`TreegenError` naming ``what``."""
    with open(path, "rb") as fh:
        raw = read_bounded(fh, limit, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TreegenError(f"{what} is not UTF-8 text") from None
