"""rocmbuild: build, check, publish and nightly-rebuild ROCm wheels for AMD Instinct GPUs."""

__version__ = "0.1.0"
