"""The write pass: a template context -> the files of an export, in one of the library layouts.

``plain``       DIR/<name>.h, DIR/<name>.c; example: DIR/example/main.c
``platformio``  a PlatformIO library: DIR/library.json, DIR/src/<name>.h, DIR/src/<name>.c (copy DIR into a
                project's ``lib/``); example: DIR/examples/<name>/main.c (not compiled with the library)
``arduino``     an Arduino library (1.5 format): DIR/library.properties, DIR/src/<name>.h, DIR/src/<name>.c;
                example: the sketch DIR/examples/<name>/<name>.ino
``cmake``       a CMake library for ``add_subdirectory``: DIR/CMakeLists.txt (static library ``tg_<name>``,
                alias ``treegen::<name>``, C99), DIR/src/<name>.{h,c}; example: DIR/example/main.c
``zephyr``      a Zephyr module: DIR/zephyr/module.yml, DIR/zephyr/CMakeLists.txt (a Zephyr library when
                ``CONFIG_TG_<NAME>``), DIR/zephyr/Kconfig, DIR/src/<name>.{h,c}; example: a Zephyr sample
                application DIR/example/ (CMakeLists.txt with ``find_package(Zephyr)`` and the module
                one folder up in ``ZEPHYR_EXTRA_MODULES``, prj.conf, sample.yaml, src/main.c printing
                with ``printk``): ``west build -b <board> DIR/example``
``espidf``      an ESP-IDF component: DIR/CMakeLists.txt (``idf_component_register``), DIR/idf_component.yml,
                DIR/src/<name>.{h,c}; example: DIR/example/main.c

The library folders never hold a ``main()``: the example is written only with ``example=True``.
Files already there are replaced only if treegen generated them (they carry its banner) or with
``force``; otherwise nothing is written. ``DIR/.treegen-manifest.json`` records what was written, so a
later export into DIR removes what this one wrote and it does not (:mod:`treegen.emit.manifest`).

The same layouts serve tree exports (``templates/c/model.{h,c}.j2``) and boosted (vote sum) exports
(``templates/c/boost*.{h,c}.j2``): ``write_library(..., sources=...)`` names the header and source
templates, and every example but the plain C one of a tree export renders from one example
description (:func:`example_spec`: input rows, the entry point called, its expected outputs).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from treegen.core.codegen import check_overwrite, prepare_out_dir, render, write_generated
from treegen.core.errors import TreegenError
from treegen.emit import manifest as _manifest
from treegen.emit.options import LIB_LAYOUTS

LIB_VERSION = "1.0.0"      # version of the generated PlatformIO/Arduino library (the model hash identifies it)
TEMPLATES = {"header": "c/model.h.j2", "source": "c/model.c.j2", "main": "c/main.c.j2",
             "library.json": "library/library.json.j2", "library.properties": "library/library.properties.j2",
             "sketch": "library/sketch.ino.j2", "cmake": "library/CMakeLists.txt.j2",
             "zephyr/module.yml": "library/zephyr_module.yml.j2",
             "zephyr/CMakeLists.txt": "library/zephyr_CMakeLists.txt.j2", "zephyr/Kconfig": "library/zephyr_Kconfig.j2",
             "idf/CMakeLists.txt": "library/idf_CMakeLists.txt.j2", "idf_component.yml": "library/idf_component.yml.j2",
             "example_main": "library/example_main.c.j2",
             "zephyr/sample/CMakeLists.txt": "library/zephyr_sample_CMakeLists.txt.j2",
             "zephyr/sample/prj.conf": "library/zephyr_sample_prj.conf.j2",
             "zephyr/sample/sample.yaml": "library/zephyr_sample.yaml.j2",
             "zephyr/sample/main.c": "library/zephyr_sample_main.c.j2"}
#: the Zephyr sample application of ``--example`` (under DIR/example/): {file: template key}
ZEPHYR_SAMPLE = {"CMakeLists.txt": "zephyr/sample/CMakeLists.txt", "prj.conf": "zephyr/sample/prj.conf",
                 "sample.yaml": "zephyr/sample/sample.yaml", "src/main.c": "zephyr/sample/main.c"}
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
    if lib_layout == "zephyr":
        return out / "example" / "src" / "main.c"
    if lib_layout in ("plain", "cmake", "espidf"):
        return out / "example" / "main.c"
    if lib_layout == "platformio":
        return out / "examples" / name / "main.c"
    return out / "examples" / name / f"{name}.ino"


def project_url() -> str | None:
    """The project's URL from the installed package's metadata (``Project-URL`` / ``Home-page``), or
    None when it declares none (the Arduino library then has no ``url=`` line)."""
    try:
        md = importlib.metadata.metadata("treegen")
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in md.get_all("Project-URL") or []:
        url = entry.partition(",")[2].strip()
        if url:
            return url
    home = md.get("Home-page")
    return home if home and home != "UNKNOWN" else None


def example_spec(ctx: dict) -> dict:
    """The example of a tree export's template context ``ctx`` as the layouts' example templates read
    it: ``rows`` (C literals per row), ``in_t`` (row element type), ``call`` (the entry point: one
    row in, one output), ``out_t`` (its C type), ``is_class``, ``expected`` (C literals), ``unit``."""
    value = ctx.get("value")
    if value is None:
        call, out_t, unit = f"tg_{ctx['name']}_predict", "int", ""
    elif ctx["dtype"] == "q15":
        call, out_t, unit = f"tg_{ctx['name']}_predict_value", "int32_t", f" (units of 2^-{value['frac_bits']})"
    else:
        call, out_t, unit = f"tg_{ctx['name']}_predict_value_f32", "float", ""
    return {"rows": [[f"{v}f" for v in e["raw"]] for e in ctx["examples"]], "in_t": "float", "call": call,
            "out_t": out_t, "is_class": value is None, "expected": [str(e["expected"]) for e in ctx["examples"]],
            "unit": unit}


def library_texts(ctx: dict, out_dir, *, lib_layout: str = "plain", example: bool = False,
                  sources: tuple = ("header", "source"), spec: dict | None = None) -> dict:
    """{path: text} of an export (see :data:`LIB_LAYOUTS`), rendered from the templates. ``sources``:
    the template keys (or template names) of ``<name>.h`` and ``<name>.c``; ``spec``: the example
    description (default :func:`example_spec` of ``ctx``); a boosted export passes both."""
    if lib_layout not in LIB_LAYOUTS:      # checked up front by the options pass; this guards direct calls
        raise TreegenError(f"unknown library layout {lib_layout!r} (choose from {', '.join(LIB_LAYOUTS)})")
    out, ident = Path(out_dir), ctx["name"]
    src = library_src_dir(out, lib_layout)
    texts = {}
    lib_ctx = {"task": "regression" if ctx.get("value") else "classification", "q15_only": False, **ctx,
               "lib_version": LIB_VERSION, "example": bool(example), "url": project_url()}
    lib_ctx["n_q15_only"] = lib_ctx["q15_only"]
    for rel, key in LAYOUT_FILES.get(lib_layout, {}).items():
        texts[out / rel] = render(TEMPLATES[key], lib_ctx)
    header, source = (TEMPLATES.get(k, k) for k in sources)
    texts[src / f"{ident}.h"] = render(header, ctx)
    texts[src / f"{ident}.c"] = render(source, ctx)
    if example:
        ex_ctx = {**lib_ctx, "ex": spec if spec is not None else example_spec(ctx)}
        if lib_layout == "zephyr":
            for rel, key in ZEPHYR_SAMPLE.items():
                texts[out / "example" / rel] = render(TEMPLATES[key], ex_ctx)
        elif lib_layout == "arduino":
            texts[example_path(out, ident, lib_layout)] = render(TEMPLATES["sketch"], ex_ctx)
        else:   # a tree export's own main.c (Q15 and float entries); others: the generic one
            texts[example_path(out, ident, lib_layout)] = render(
                TEMPLATES["main"] if spec is None else TEMPLATES["example_main"], ex_ctx)
    return texts


def write_library(ctx: dict, out_dir, *, lib_layout: str = "plain", example: bool = False,
                  force: bool = False, sources: tuple = ("header", "source"),
                  spec: dict | None = None) -> tuple[list, Path, list]:
    """Render and write the files of an export (:func:`library_texts`); returns (the written paths,
    the folder of ``<name>.h`` / ``<name>.c``, notes). Nothing is written when a file would be
    clobbered (:func:`treegen.core.codegen.check_overwrite`, :func:`treegen.emit.manifest.plan`);
    the previous export's files this one does not write are removed (:mod:`treegen.emit.manifest`)."""
    texts = library_texts(ctx, Path(out_dir), lib_layout=lib_layout, example=example, sources=sources,
                          spec=spec)
    check_overwrite(texts, force=force)
    remove, kept = _manifest.plan(Path(out_dir), texts, force=force)
    out = prepare_out_dir(Path(out_dir))
    for path in texts:
        prepare_out_dir(path.parent)
    for path, text in texts.items():
        write_generated(path, text, force=force)
    _manifest.apply(out, texts, remove)
    notes = []
    if remove:
        notes.append(f"removed {len(remove)} file(s) of the previous export into {out} that this one does not "
                     f"write: {', '.join(p.relative_to(out).as_posix() for p in remove)}")
    if kept:
        notes.append(f"kept {', '.join(p.relative_to(out).as_posix() for p in kept)}: written by the previous "
                     "export, changed since (not removed)")
    return list(texts), library_src_dir(out, lib_layout), notes
