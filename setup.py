"""Build script for the optional C accelerators; everything else is in pyproject.toml.

kpax.proto._speedups speeds up the RecordBatch v2 record loops and CRC-32C;
kpax.producer._sendpath the producer's per-record send path. Both are
optional: when no C compiler (or no Python headers) is at hand the build goes
on without them and kpax runs its pure-Python code, which gives the same
results. Each extension that could not be built is named in one line on
stderr ("kpax: C extension ... not built (...)"); pip shows build output with
``pip install -v``, ``python -m build`` always.
"""

from __future__ import annotations

import os
import re
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that turns the failure of an optional extension into one clear line."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all (e.g. MSVC missing on Windows)
            if not all(ext.optional for ext in self.extensions):
                raise
            for ext in self.extensions:
                _warn(ext.name, exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, LinkError, DistutilsExecError, OSError...
            if not ext.optional:
                raise
            _warn(ext.name, exc)


def _warn(name: str, exc: BaseException) -> None:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    # "Command '['gcc', ...]' returned non-zero exit status 1." (the compiler's own
    # message is printed above it): name the program and the status only.
    failed = re.match(r"Command '\['([^']*)'.*non-zero exit status (-?\d+)", reason)
    if failed:
        reason = f"{os.path.basename(failed[1])} exited with status {failed[2]}"
    elif len(reason) > 200:
        reason = reason[:197] + "..."
    print(
        f"kpax: C extension {name} not built ({reason}): kpax will run its pure-Python code",
        file=sys.stderr,
        flush=True,
    )


setup(
    cmdclass={"build_ext": OptionalBuildExt},
    ext_modules=[
        Extension(
            "kpax.proto._speedups",
            ["kpax/proto/_speedups.c"],
            depends=["kpax/proto/_varint.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "kpax.producer._sendpath",
            ["kpax/producer/_sendpath.c"],
            depends=["kpax/proto/_varint.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ],
)
