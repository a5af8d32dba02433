"""The wheel carries its data plane: building it runs the dataplane Makefile and puts libdpp.so and
the BPF objects the package uses into netapp/dataplane/lib/ (netapp.dataplane.binding finds them
there first). Everything else is declared in pyproject.toml.

The wheel is tagged py3-none-linux_<arch>: it holds no Python extension, so any Python 3 runs it,
but libdpp.so is machine code for one architecture. It is not a manylinux wheel: libdpp links the
system's libbpf.so.1 and libelf.so.1 (Debian/Ubuntu packages libbpf1, libelf1), which no
manylinux policy allows a wheel to expect and which auditwheel would have to bundle; the charm and
the VM's cloud-init install them instead. An editable install (`pip install -e .`) builds nothing:
it uses the checkout's dataplane/build, as `make` builds it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 has it; older ones take it from the wheel package, if installed
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # no wheel can be built here, an sdist can
        bdist_wheel = None

HERE = Path(__file__).resolve().parent
DATAPLANE = HERE / "dataplane"
# What the package loads at run time, from dataplane/build: libdpp (its BPF programs are compiled
# in as skeletons) and the empty XDP program the demo's alternative node runs.
ARTEFACTS = ("libdpp.so", "xdp_pass.bpf.o")
PACKAGED_DIR = Path("netapp") / "dataplane" / "lib"


class BuildPyWithDataplane(build_py):
    """build_py, then `make -C dataplane` for ARTEFACTS, copied into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        targets = [f"build/{name}" for name in ARTEFACTS]
        subprocess.run(["make", "--no-print-directory", "-C", str(DATAPLANE), *targets], check=True)
        dest = Path(self.build_lib) / PACKAGED_DIR
        dest.mkdir(parents=True, exist_ok=True)
        for name in ARTEFACTS:
            shutil.copy2(DATAPLANE / "build" / name, dest / name)


class BinaryDistribution(Distribution):
    """A distribution holding machine code: its wheel is platform-specific (platlib, not purelib)."""

    def has_ext_modules(self) -> bool:
        return True


commands = {"build_py": BuildPyWithDataplane}
if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """A wheel for this platform, for any Python 3 (see the module's docstring)."""

        def get_tag(self) -> tuple[str, str, str]:
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = PlatformWheel

setup(distclass=BinaryDistribution, cmdclass=commands)
