# rocmbuild on an official ROCm development image.
#
# Base: rocm/dev-ubuntu-24.04:6.4.4, chosen because
#  - Ubuntu 24.04's python3 is 3.12, which meets rocmbuild's requires-python (>= 3.11); the
#    22.04 images have 3.10 and cannot install rocmbuild;
#  - ROCm 6.4 is a release PyTorch publishes ROCm wheels for (download.pytorch.org/whl/rocm6.4),
#    so torch and the SDK the extensions compile against agree; the patch release is pinned so
#    that a rebuild of this image gets the same compiler.
# tests/unit/test_dockerfile.py checks these facts against pyproject.toml.
#
# No Docker engine runs on the project's own machines: this file is linted (hadolint), not built.
# On an AMD host:
#   docker build -t rocmbuild --build-arg UID=$(id -u) --build-arg GID=$(id -g) .
#   docker run --rm --device /dev/kfd --device /dev/dri \
#     --group-add "$(getent group render | cut -d: -f3)" --group-add video \
#     -v "$PWD:/work" rocmbuild flash-attn --arch native
# Outputs land in ./build on the host, owned by the UID/GID the image was built with (or run
# with --user "$(id -u):$(id -g)" instead of rebuilding). The render group's number differs from
# host to host, hence --group-add with the host's number: /dev/kfd and /dev/dri/renderD* belong
# to it.
FROM rocm/dev-ubuntu-24.04:6.4.4

ARG UID=1000
ARG GID=1000
# The ROCm 6.4 build of torch (never a CUDA one from PyPI).
ARG TORCH_INDEX=https://download.pytorch.org/whl/rocm6.4

ENV DEBIAN_FRONTEND=noninteractive \
    HIP_PLATFORM=amd \
    ROCM_PATH=/opt/rocm \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Unpinned apt packages on purpose: the image is pinned by its tag, and Ubuntu's security
# updates should apply when it is rebuilt.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git python3 python3-venv python3-dev ninja-build \
 && rm -rf /var/lib/apt/lists/*

# A non-root user whose UID/GID match the host user's, in the render and video groups (the
# GPU device nodes' groups). Ubuntu 24.04 images ship a user `ubuntu` with UID 1000: removed.
RUN (userdel -r ubuntu 2>/dev/null || true) \
 && (getent group "${GID}" >/dev/null || groupadd -g "${GID}" rocmbuild) \
 && groupadd -f render && groupadd -f video \
 && useradd -m -l -u "${UID}" -g "${GID}" -G render,video -s /bin/bash rocmbuild

COPY . /opt/rocmbuild-src

# rocmbuild installed as a tool (its recipes, patches and probes are package data), torch from
# the ROCm index, and the build tools that --no-build-isolation builds expect to find.
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --index-url "${TORCH_INDEX}" torch \
 && /opt/venv/bin/pip install /opt/rocmbuild-src setuptools wheel packaging psutil ninja \
      "cmake>=3.27" scikit-build-core \
 && rm -rf /opt/rocmbuild-src

ENV PATH=/opt/venv/bin:$PATH \
    ROCMBUILD_WORKDIR=/work/build

# By name, so that the user's render and video memberships (/etc/group) apply.
# hadolint ignore=DL3066
USER rocmbuild
WORKDIR /work
ENTRYPOINT ["rocmbuild"]
CMD ["--help"]
