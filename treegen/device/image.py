"""The identity of a firmware image: sha256 over the ELF's loadable contents.

Two builds are the same image when the bytes they put into the part's memory are the same: every
``PT_LOAD`` segment's file contents (``p_filesz`` bytes: code, read-only data, the initial values of
``.data``) with its load address (``p_paddr``), in address order. Debug sections, symbol tables and
paths in the ELF do not count. ``treegen build --target nucleo_f446re`` and ``treegen hil --target
qemu-netduinoplus2`` print this digest, so "the emulator ran the board's image" is checked, not assumed.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from treegen.core.errors import TreegenError

PT_LOAD = 1


def loadable_segments(elf) -> list[tuple[int, bytes]]:
    """``(load address, bytes)`` of every non-empty PT_LOAD segment of a 32-bit little-endian ELF."""
    path = Path(elf)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TreegenError(f"cannot read firmware {path}: {exc.strerror or exc}") from None
    if data[:4] != b"\x7fELF" or len(data) < 52 or data[4] != 1 or data[5] != 1:
        raise TreegenError(f"{path} is not a 32-bit little-endian ELF file")
    phoff, = struct.unpack_from("<I", data, 28)
    phentsize, phnum = struct.unpack_from("<HH", data, 42)
    out = []
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 32 > len(data):
            raise TreegenError(f"{path}: truncated program header table")
        p_type, p_offset, _vaddr, p_paddr, p_filesz = struct.unpack_from("<IIIII", data, off)
        if p_type == PT_LOAD and p_filesz > 0:
            if p_offset + p_filesz > len(data):
                raise TreegenError(f"{path}: segment {i} extends past the end of the file")
            out.append((p_paddr, data[p_offset:p_offset + p_filesz]))
    return sorted(out)


def image_sha256(elf) -> str:
    """sha256 hex of the loadable image: for each segment in address order, its 4-byte little-endian
    load address, 4-byte length, then its bytes."""
    h = hashlib.sha256()
    for addr, blob in loadable_segments(elf):
        h.update(struct.pack("<II", addr, len(blob)))
        h.update(blob)
    return h.hexdigest()
