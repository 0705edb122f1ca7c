"""The write pass: a template context -> the files of an export, in one of the library layouts.

``plain``       DIR/<name>.h, DIR/<name>.c; example: DIR/example/main.c
``platformio``  a PlatformIO library: DIR/library.json, DIR/src/<name>.h, DIR/src/<name>.c (copy DIR into a
                project's ``lib/``); example: DIR/examples/<name>/main.c (not compiled with the library)
``arduino``     an Arduino library (1.5 format): DIR/library.properties, DIR/src/<name>.h, DIR/src/<name>.c;
                example: the sketch DIR/examples/<name>/<name>.ino
``cmake``       a CMake library for ``add_subdirectory``: DIR/CMakeLists.txt (static library ``tg_<name>``,
                alias ``treegen::<name>``, C99), DIR/src/<name>.{h,c}; example: DIR/example/main.c
``zephyr``      a Zephyr module: DIR/zephyr/module.yml, DIR/zephyr/CMakeLists.txt (a Zephyr library when
                ``CONFIG_TG_<NAME>``), DIR/zephyr/Kconfig, DIR/src/<name>.{h,c}; example: DIR/example/main.c
``espidf``      an ESP-IDF component: DIR/CMakeLists.txt (``idf_component_register``), DIR/idf_component.yml,
                DIR/src/<name>.{h,c}; example: DIR/example/main.c

The library folders never hold a ``main()``: the example is written only with ``example=True``.
Files already there are replaced only if treegen generated them (they carry its banner) or with
``force``; otherwise nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from treegen.core.codegen import check_overwrite, prepare_out_dir, render, write_generated
from treegen.emit.options import LIB_LAYOUTS, _choice

LIB_VERSION = "1.0.0"      # version of the generated PlatformIO/Arduino library (the model hash identifies it)
TEMPLATES = {"header": "c/model.h.j2", "source": "c/model.c.j2", "main": "c/main.c.j2",
             "library.json": "library/library.json.j2", "library.properties": "library/library.properties.j2",
             "sketch": "library/sketch.ino.j2", "cmake": "library/CMakeLists.txt.j2",
             "zephyr/module.yml": "library/zephyr_module.yml.j2",
             "zephyr/CMakeLists.txt": "library/zephyr_CMakeLists.txt.j2", "zephyr/Kconfig": "library/zephyr_Kconfig.j2",
             "idf/CMakeLists.txt": "library/idf_CMakeLists.txt.j2", "idf_component.yml": "library/idf_component.yml.j2"}
#: per library layout beyond plain: {file under DIR: template key}
LAYOUT_FILES = {"platformio": {"library.json": "library.json"},
                "arduino": {"library.properties": "library.properties"},
                "cmake": {"CMakeLists.txt": "cmake"},
                "zephyr": {"zephyr/module.yml": "zephyr/module.yml", "zephyr/CMakeLists.txt": "zephyr/CMakeLists.txt",
                           "zephyr/Kconfig": "zephyr/Kconfig"},
                "espidf": {"CMakeLists.txt": "idf/CMakeLists.txt", "idf_component.yml": "idf_component.yml"}}


def library_src_dir(out_dir, lib_layout: str = "plain") -> Path:
    """Folder of ``<name>.h`` / ``<name>.c`` in an export of layout ``lib_layout``."""
    return Path(out_dir) if lib_layout == "plain" else Path(out_dir) / "src"


def example_path(out_dir, name: str, lib_layout: str = "plain") -> Path:
    """Where ``export_model(..., example=True)`` writes the example program of model ``name``."""
    out = Path(out_dir)
    if lib_layout in ("plain", "cmake", "zephyr", "espidf"):
        return out / "example" / "main.c"
    if lib_layout == "platformio":
        return out / "examples" / name / "main.c"
    return out / "examples" / name / f"{name}.ino"


def library_texts(ctx: dict, out_dir, *, lib_layout: str = "plain", example: bool = False) -> dict:
    """{path: text} of an export (see :data:`LIB_LAYOUTS`), rendered from the templates."""
    _choice(lib_layout, LIB_LAYOUTS, "library layout")
    out, ident = Path(out_dir), ctx["name"]
    src = library_src_dir(out, lib_layout)
    texts = {}
    lib_ctx = {**ctx, "lib_version": LIB_VERSION, "example": bool(example)}
    for rel, key in LAYOUT_FILES.get(lib_layout, {}).items():
        texts[out / rel] = render(TEMPLATES[key], lib_ctx)
    texts[src / f"{ident}.h"] = render(TEMPLATES["header"], ctx)
    texts[src / f"{ident}.c"] = render(TEMPLATES["source"], ctx)
    if example:
        texts[example_path(out, ident, lib_layout)] = render(
            TEMPLATES["sketch" if lib_layout == "arduino" else "main"], ctx)
    return texts


def write_library(ctx: dict, out_dir, *, lib_layout: str = "plain", example: bool = False,
                  force: bool = False) -> tuple[list, Path]:
    """Render and write the files of an export (:func:`library_texts`); returns (the written paths,
    the folder of ``<name>.h`` / ``<name>.c``). Nothing is written when a file would be clobbered
    (:func:`treegen.core.codegen.check_overwrite`)."""
    texts = library_texts(ctx, Path(out_dir), lib_layout=lib_layout, example=example)
    check_overwrite(texts, force=force)
    out = prepare_out_dir(Path(out_dir))
    for path in texts:
        prepare_out_dir(path.parent)
    for path, text in texts.items():
        write_generated(path, text, force=force)
    return list(texts), library_src_dir(out, lib_layout)
