"""The image identity of a firmware (treegen.device.image): sha256 over the ELF's loadable segments."""

from __future__ import annotations

import struct

import pytest

from treegen.core.errors import TreegenError
from treegen.device.image import image_sha256, loadable_segments


def _elf(segments, extra: bytes = b"") -> bytes:
    """A minimal 32-bit little-endian ELF: a header, program headers, then the segments' bytes and
    ``extra`` (non-loadable bytes, e.g. debug data, that must not count)."""
    phoff, phentsize = 52, 32
    data_off = phoff + phentsize * len(segments)
    header = bytearray(52)
    header[:6] = b"\x7fELF\x01\x01"
    struct.pack_into("<I", header, 28, phoff)
    struct.pack_into("<HH", header, 42, phentsize, len(segments))
    phdrs, blobs = b"", b""
    for p_type, addr, blob in segments:
        phdrs += struct.pack("<IIIIIIII", p_type, data_off + len(blobs), addr, addr, len(blob), len(blob), 5, 4)
        blobs += blob
    return bytes(header) + phdrs + blobs + extra


def test_only_loadable_bytes_and_their_addresses_count(tmp_path):
    a, b, c, d = (tmp_path / n for n in "abcd")
    a.write_bytes(_elf([(1, 0x08000000, b"code"), (1, 0x08000100, b"data"), (4, 0, b"note")]))
    b.write_bytes(_elf([(1, 0x08000100, b"data"), (1, 0x08000000, b"code")], extra=b"debug info, paths"))
    c.write_bytes(_elf([(1, 0x08000000, b"code"), (1, 0x08000104, b"data")]))      # moved .data
    d.write_bytes(_elf([(1, 0x08000000, b"code"), (1, 0x08000100, b"dat!")]))      # other bytes
    assert loadable_segments(a) == [(0x08000000, b"code"), (0x08000100, b"data")]
    assert image_sha256(a) == image_sha256(b)
    assert len({image_sha256(a), image_sha256(c), image_sha256(d)}) == 3


def test_not_an_elf_is_one_line(tmp_path):
    bad = tmp_path / "fw.bin"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(TreegenError, match=r"fw.bin is not a 32-bit little-endian ELF file"):
        image_sha256(bad)
    with pytest.raises(TreegenError, match=r"cannot read firmware"):
        image_sha256(tmp_path / "missing.elf")
