"""Builds the wheel's native part with the project's CMake (pyproject.toml says why).

The project is configured in a build directory of its own so that the wheel's layout is the
install layout:

    hmc/_hmc.*.so           the extension, RPATH $ORIGIN/_lib
    hmc/_lib/libhmc.so.0    the library
    hmc/_lib/hmc/*.so       the plugins, where libhmc looks for them (beside itself, in hmc/)

Settings, from the environment (none starts with HMC_: hmc warns about those it does not know):
    CMAKE_ARGS                  more arguments for the configure step
    CMAKE_BUILD_PARALLEL_LEVEL  parallel build jobs (CMake's own variable)
    PYHMC_BUILD_DIR             the CMake build directory (default: build/cmake under python/);
                                kept, so a second build is incremental
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*hmc\s+VERSION\s+([0-9.]+)", text)
    if not m:
        raise RuntimeError("no project(hmc VERSION x.y.z) in " + str(ROOT / "CMakeLists.txt"))
    return m.group(1)


class CMakeBuild(build_ext):
    """Configures, builds and installs the project into a staging prefix, then copies the
    package's tree (extension, libhmc, plugins) into the wheel."""

    def run(self):
        if shutil.which("cmake") is None:
            raise RuntimeError("building hmc needs cmake (Debian: apt-get install cmake)")
        build = Path(os.environ.get("PYHMC_BUILD_DIR", HERE / "build" / "cmake")).resolve()
        stage = build / "stage"
        if stage.exists():
            shutil.rmtree(stage)
        args = [
            "cmake", "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DHMC_BUILD_TESTS=OFF",
            "-DHMC_BUILD_TOOLS=OFF",
            "-DHMC_LTO=OFF",
            "-DHMC_PYTHON=" + sys.executable,
            "-DCMAKE_INSTALL_PREFIX=" + str(stage),
            "-DHMC_PYTHON_INSTALL_DIR=" + str(stage / "pkg"),
            "-DCMAKE_INSTALL_LIBDIR=pkg/hmc/_lib",
            "-DCMAKE_INSTALL_BINDIR=bin",
        ]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"] if not (build / "CMakeCache.txt").exists() else []
        if shutil.which("ccache"):
            args += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        args += os.environ.get("CMAKE_ARGS", "").split()
        subprocess.check_call(args)
        subprocess.check_call(["cmake", "--build", str(build)])
        subprocess.check_call(["cmake", "--install", str(build)], stdout=subprocess.DEVNULL)
        package = stage / "pkg" / "hmc"
        if not any(package.glob("_hmc*.so")):
            raise RuntimeError("the CMake build made no extension (is pybind11 installed for "
                               + sys.executable + "? Debian: python3-pybind11)")
        out = Path(self.build_lib) / "hmc"
        if out.exists():
            shutil.rmtree(out)
        # A wheel holds no symbolic links: one copy of the library, under its soname (what the
        # extension asks the loader for); no development files.
        shutil.copytree(package, out, symlinks=True,
                        ignore=shutil.ignore_patterns("cmake", "pkgconfig", "__pycache__"))
        lib = out / "_lib"
        for f in list(lib.iterdir()):
            if f.name.startswith("libhmc.so") and f.is_symlink():
                target = f.resolve()
                f.unlink()
                if f.name.count(".") == 2:  # libhmc.so.0, the soname
                    shutil.copy2(target, f)
        for f in list(lib.glob("libhmc.so.*.*")):
            f.unlink()  # libhmc.so.0.1.0: its copy is libhmc.so.0 now


setup(
    version=project_version(),
    ext_modules=[Extension("hmc._hmc", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
