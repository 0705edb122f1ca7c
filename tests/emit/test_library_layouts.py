"""The library layouts for build systems (treegen.emit.library): a CMake library built into a user
program with add_subdirectory (host compiler, and arm-none-eabi through a toolchain file), and the
Zephyr module and ESP-IDF component checked against their documented structure: the CMake of each is
executed with the build system's own functions stubbed (no Zephyr SDK or ESP-IDF offline), so its
syntax is CMake's and every file it names exists."""

from __future__ import annotations

import subprocess
from pathlib import Path

from export_models import require, small_models

from treegen.emit.export import export_model

USER_CMAKE = """cmake_minimum_required(VERSION 3.13)
project(user_app LANGUAGES C)
add_subdirectory(lib/demo)
add_executable(user_app main.c)
target_link_libraries(user_app PRIVATE treegen::demo)
"""

ARM_TOOLCHAIN = """set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS_INIT "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os")
set(CMAKE_EXE_LINKER_FLAGS_INIT "--specs=nosys.specs")
"""


def _export(tmp_path: Path, layout: str) -> Path:
    out = tmp_path / "lib" / "demo"
    rep = export_model(small_models()["oblique"], out, target="cortex-m4", lib_layout=layout, measure=False,
                       example=True)
    assert all(Path(f).is_file() for f in rep.files)
    return out


def _cmake_build(src: Path, build: Path, *extra: str) -> None:
    cmake = require("cmake")
    for cmd in ([cmake, "-S", str(src), "-B", str(build), "-G", "Ninja", *extra],
                [cmake, "--build", str(build)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cmake_library_in_a_user_program_host_and_arm(tmp_path):
    lib = _export(tmp_path, "cmake")
    assert sorted(p.relative_to(lib).as_posix() for p in lib.rglob("*") if p.is_file()) == \
        [".treegen-manifest.json", "CMakeLists.txt", "example/main.c", "src/demo.c", "src/demo.h"]
    (tmp_path / "CMakeLists.txt").write_text(USER_CMAKE)
    (tmp_path / "main.c").write_text((lib / "example" / "main.c").read_text())
    _cmake_build(tmp_path, tmp_path / "build-host", "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror -Wconversion")
    proc = subprocess.run([str(tmp_path / "build-host" / "user_app")], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "0 of 4 rows differ from the Python model" in proc.stdout, proc.stdout
    require("arm-none-eabi-gcc")
    (tmp_path / "arm.cmake").write_text(ARM_TOOLCHAIN)
    _cmake_build(tmp_path, tmp_path / "build-arm", f"-DCMAKE_TOOLCHAIN_FILE={tmp_path / 'arm.cmake'}")
    elf = tmp_path / "build-arm" / "user_app"
    head = elf.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 40  # EM_ARM


def _run_cmake_script(tmp_path: Path, script: str) -> str:
    path = tmp_path / "check.cmake"
    path.write_text(script)
    proc = subprocess.run([require("cmake"), "-P", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_zephyr_module_structure(tmp_path):
    """zephyr/module.yml names the module and points build.cmake / build.kconfig at the files (Zephyr's
    "Module yaml file description"); the CMakeLists adds src/<name>.c to a Zephyr library under the
    Kconfig symbol the Kconfig file declares."""
    mod = _export(tmp_path, "zephyr")
    yml = [ln for ln in (mod / "zephyr" / "module.yml").read_text().splitlines() if ln and not ln.startswith("#")]
    assert yml == ["name: tg_demo", "build:", "  cmake: zephyr", "  kconfig: zephyr/Kconfig"]
    assert (mod / "zephyr" / "CMakeLists.txt").is_file() and (mod / "zephyr" / "Kconfig").is_file()
    kconfig = (mod / "zephyr" / "Kconfig").read_text().splitlines()
    assert "config TG_DEMO" in kconfig and kconfig[kconfig.index("config TG_DEMO") + 1] == '\tbool "treegen model demo"'
    out = _run_cmake_script(tmp_path, f"""
set(ZEPHYR_CURRENT_MODULE_DIR "{mod}")
set(CONFIG_TG_DEMO y)
set(CALLS "")
function(zephyr_library_named name)
  set(CALLS "${{CALLS}} library=${{name}}" PARENT_SCOPE)
endfunction()
function(zephyr_library_sources)
  foreach(f ${{ARGN}})
    if(NOT EXISTS "${{f}}")
      message(FATAL_ERROR "missing source ${{f}}")
    endif()
    message(STATUS "source ${{f}}")
  endforeach()
endfunction()
function(zephyr_include_directories)
  foreach(d ${{ARGN}})
    if(NOT EXISTS "${{d}}/demo.h")
      message(FATAL_ERROR "no demo.h in ${{d}}")
    endif()
    message(STATUS "include ${{d}}")
  endforeach()
endfunction()
include("{mod}/zephyr/CMakeLists.txt")
message(STATUS "calls:${{CALLS}}")
""")
    assert f"source {mod}/src/demo.c" in out and f"include {mod}/src" in out and "calls: library=tg_demo" in out


def test_espidf_component_structure(tmp_path):
    """ESP-IDF: the component's CMakeLists.txt registers SRCS / INCLUDE_DIRS relative to the component
    folder (idf_component_register), idf_component.yml is the component manager's manifest (version,
    description, dependencies.idf)."""
    comp = _export(tmp_path, "espidf")
    manifest = [ln for ln in (comp / "idf_component.yml").read_text().splitlines() if ln and not ln.startswith("#")]
    assert manifest[0] == 'version: "1.0.0"' and manifest[1].startswith("description: ")
    assert manifest[2:] == ["dependencies:", "  idf:", '    version: ">=4.1"']
    out = _run_cmake_script(tmp_path, f"""
set(CMAKE_CURRENT_LIST_DIR "{comp}")
function(idf_component_register)
  cmake_parse_arguments(A "" "" "SRCS;INCLUDE_DIRS" ${{ARGN}})
  foreach(f ${{A_SRCS}})
    if(NOT EXISTS "{comp}/${{f}}")
      message(FATAL_ERROR "missing source ${{f}}")
    endif()
    message(STATUS "source ${{f}}")
  endforeach()
  foreach(d ${{A_INCLUDE_DIRS}})
    if(NOT EXISTS "{comp}/${{d}}/demo.h")
      message(FATAL_ERROR "no demo.h in ${{d}}")
    endif()
    message(STATUS "include ${{d}}")
  endforeach()
endfunction()
include("{comp}/CMakeLists.txt")
""")
    assert "source src/demo.c" in out and "include src" in out
