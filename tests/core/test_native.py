"""The native-kernel loader: strict compile, cache by source hash under TREEGEN_CACHE, concurrent
builders, one-line errors; the engines' kernels are described with it."""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor

import pytest

from treegen.core.errors import TreegenError
from treegen.core.native import STRICT_CFLAGS, NativeKernel

KERNEL = NativeKernel("test kernel", ("test/tg_test.c.j2",), "libtg_test.so", cache_name="test")
SOURCES = {"tg_test.h": "int tg_test_add(int a, int b);\n",
           "tg_test.c": '#include "tg_test.h"\nint tg_test_add(int a, int b) { return a + b; }\n'}


def test_builds_once_per_source_and_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("TREEGEN_CACHE", str(tmp_path))
    lib = KERNEL.build(SOURCES)
    assert lib.parent.parent == tmp_path / "test" and lib.name == "libtg_test.so"
    assert sorted(p.name for p in lib.parent.iterdir()) == ["libtg_test.so", "tg_test.c", "tg_test.h"]
    assert lib.parent.joinpath("tg_test.c").read_text() == SOURCES["tg_test.c"]
    stamp = lib.stat().st_mtime_ns
    assert KERNEL.build(SOURCES) == lib and lib.stat().st_mtime_ns == stamp        # a cache hit
    assert KERNEL.load(SOURCES).tg_test_add(2, 3) == 5
    other = KERNEL.build({**SOURCES, "tg_test.c": SOURCES["tg_test.c"] + "/* changed */\n"})
    assert other != lib and other.parent.parent == lib.parent.parent              # new source, new folder


def test_concurrent_builders_share_one_complete_library(tmp_path, monkeypatch):
    monkeypatch.setenv("TREEGEN_CACHE", str(tmp_path))
    with ThreadPoolExecutor(4) as pool:
        libs = list(pool.map(lambda _: KERNEL.build(SOURCES), range(4)))
    assert len(set(libs)) == 1
    assert sorted(p.name for p in libs[0].parent.iterdir()) == ["libtg_test.so", "tg_test.c", "tg_test.h"]
    assert ctypes.CDLL(str(libs[0])).tg_test_add(40, 2) == 42


def test_strict_flags_and_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("TREEGEN_CACHE", str(tmp_path))
    assert set(STRICT_CFLAGS) <= set(KERNEL.flags) and "-Wconversion" in KERNEL.flags
    lossy = {"tg_test.c": "int tg_test_half(double d);\nint tg_test_half(double d) { return d / 2; }\n"}
    with pytest.raises(TreegenError, match=r"^compiling the test kernel failed: .*error.*conversion") as exc:
        KERNEL.build(lossy)
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "test").exists() or not any((tmp_path / "test").glob("*/libtg_test.so"))
    monkeypatch.setenv("CC", "no-such-compiler-tg")
    with pytest.raises(TreegenError, match=r"^the native test kernel needs a C compiler \('no-such-compiler-tg'"):
        KERNEL.build(SOURCES)


def test_engines_render_their_templates_with_the_banner():
    from treegen.learn import engine, native_de_pdt

    sources = engine.render_engine(engine.engine_sizes(100, 4, 3, 4))
    assert list(sources) == ["tg_efti.h", "tg_efti.c"]
    assert "from templates/efti — generated, do not edit. Sizes: 1024 instances" in sources["tg_efti.c"]
    assert "from templates/de_pdt — generated, do not edit." in native_de_pdt.source()


def test_load_for_renders_only_inputs_it_has_not_built(tmp_path, monkeypatch):
    """load_for(ctx) = load(render(ctx)), rendering only on a miss: the same inputs again load the
    recorded library without Jinja; another context, an edited template or a removed library is a miss."""
    from treegen.core import native
    from treegen.learn import native_de_pdt

    monkeypatch.setenv("TREEGEN_CACHE", str(tmp_path))
    kernel, real, calls = native_de_pdt.KERNEL, NativeKernel.render, []
    monkeypatch.setattr(NativeKernel, "render", lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    first = kernel.load_for({})
    assert len(calls) == 1
    assert kernel.load_for({}) is first and len(calls) == 1                       # a hit: nothing rendered
    built = kernel.build(real(kernel, {}))                                         # what load(render()) loads
    assert ctypes.CDLL(str(built))._name == first._name
    kernel.load_for({"unused": 1})
    assert len(calls) == 2                                                         # another context
    monkeypatch.setattr(native, "templates_digest", lambda: "an edited template")
    kernel.load_for({})
    assert len(calls) == 3
    monkeypatch.undo()
    monkeypatch.setenv("TREEGEN_CACHE", str(tmp_path))
    monkeypatch.setattr(NativeKernel, "render", lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    built.unlink()                                                                 # the library is gone
    kernel.load_for({})
    assert len(calls) == 4 and built.is_file()
