# rocmbuild on an official ROCm development image (ROCm 6.2, Ubuntu 22.04).
# This cannot be built on the project's own machines (no Docker engine, no AMD registry access);
# it is for AMD hosts:  docker build -t rocmbuild . &&
#   docker run --device /dev/kfd --device /dev/dri --group-add video -v $PWD/build:/opt/rocmbuild/build \
#     rocmbuild flash-attn --arch gfx942
FROM rocm/dev-ubuntu-22.04:6.2

ENV DEBIAN_FRONTEND=noninteractive \
    HIP_PLATFORM=amd \
    ROCM_PATH=/opt/rocm \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends git python3 python3-venv python3-dev ninja-build \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/rocmbuild
COPY . /opt/rocmbuild

# A ROCm build of torch first (never a CUDA one from PyPI), then rocmbuild and the build tools
# that --no-build-isolation builds expect to find.
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --index-url https://download.pytorch.org/whl/rocm6.2 torch \
 && /opt/venv/bin/pip install -e /opt/rocmbuild setuptools wheel packaging psutil ninja \
      "cmake>=3.27" scikit-build-core

ENV PATH=/opt/venv/bin:$PATH
ENTRYPOINT ["rocmbuild"]
CMD ["--help"]
