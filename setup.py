"""Build script for the optional C accelerator; everything else is in pyproject.toml.

kpax.proto._speedups speeds up the RecordBatch v2 record loops and CRC-32C;
kpax.producer._sendpath the producer's per-record send path. Both are
optional: when no C compiler (or no Python headers) is at hand the build goes
on without it and kpax runs its pure-Python code, which gives the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kpax.proto._speedups",
            ["kpax/proto/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "kpax.producer._sendpath",
            ["kpax/producer/_sendpath.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
