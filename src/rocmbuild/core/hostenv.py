"""What a build sees of the host's environment: an explicit allow-list, not everything.

A build child (the hipify command, ``pip wheel``, cmake) gets the plan's env (recipe, arch,
variant; ``rocmbuild plan`` prints it) on top of only those host variables whose names match
``PASS_ENV`` or the recipe's ``build.pass_env``. Anything else the user happened to export
(``FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE`` would turn a ``--variant ck`` build into a Triton
wheel, ``CFLAGS`` or ``CPATH`` would change what is compiled) does not reach the build.

The list holds what a build needs to run on a host and does not change what it builds: where
programs and libraries are, who and where the user is, the locale, temporary files, the ROCm/HIP
install, network proxies and TLS certificates, pip's index configuration, compiler caches, and
SOURCE_DATE_EPOCH. Values of passed variables may be secrets (a proxy URL or an index URL with a
password): ``rocmbuild plan`` prints their *names* only; a build's log names the variables
withheld and shows only those the build sets or changes (PATH), each through ``run.env_line``
(a URL's user:password masked).

Decided out (a recipe passes them with ``build.pass_env`` when it wants them): ``HSA_*`` and
``*_VISIBLE_DEVICES`` (the runtime's GPU selection; a build compiles for the plan's archs and
runs no GPU code), ``CC``/``CXX``/``CFLAGS``/``CXXFLAGS``/``LDFLAGS``/``CPATH``/``LIBRARY_PATH``
(they change the compiled code), ``CONDA_PREFIX``/``VIRTUAL_ENV`` (the build uses rocmbuild's
interpreter by path), and every other ``PIP_*`` (``PIP_NO_BUILD_ISOLATION``,
``PIP_CONFIG_SETTINGS`` change how pip builds).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

PASS_ENV: tuple[str, ...] = (
    # where programs, libraries and the Python that runs the build find their parts
    "PATH", "LD_LIBRARY_PATH", "PYTHONPATH",
    # the user, the home directory (pip's and git's config), the terminal, temporary files
    "HOME", "USER", "LOGNAME", "TERM", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
    # the locale (tools' messages and source decoding)
    "LANG", "LANGUAGE", "LC_*", "TZ",
    # the ROCm / HIP install the build compiles against (the plan sets ROCM_PATH and HIP_PATH
    # itself when it found a ROCm root; its values win)
    "ROCM_PATH", "ROCM_HOME", "HIP_PATH", "HIP_PLATFORM", "HIP_CLANG_PATH",
    "HIP_DEVICE_LIB_PATH", "HIP_ROCCLR_HOME", "HSA_PATH",
    # network proxies, both spellings, and TLS certificates
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
    # pip's index configuration (where packages come from, not how they are built)
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST",
    "PIP_CONFIG_FILE", "PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_NO_INDEX",
    "PIP_TIMEOUT", "PIP_RETRIES", "PIP_CACHE_DIR",
    # compiler caches: they reuse outputs, they do not change them
    "CMAKE_*_COMPILER_LAUNCHER", "CCACHE_*", "SCCACHE_*",
    # reproducible timestamps
    "SOURCE_DATE_EPOCH",
)
"""Host variables a build sees (shell-style patterns: ``*`` matches any run of characters)."""

VALIDATE_PASS: tuple[str, ...] = (
    # pip's whole configuration: the venv installs requirements from the configured index
    "PIP_*",
    # which GPUs the kernel gate may use, and the runtime's settings for them
    "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "HSA_*",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH",
    # where Triton keeps compiled kernels and finds ptxas (the NVIDIA check of Triton kernels)
    "TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_PTXAS_PATH",
)
"""What the validation venv sees besides PASS_ENV (less PYTHONPATH, which would shadow the
wheels under test). A variable that switches a wheel's behaviour at import (flash-attn's
FLASH_ATTENTION_TRITON_AMD_ENABLE) is not among them: the validator sets the wheel's own
``runtime_env`` from its provenance, so a CK wheel is never checked as a Triton one."""

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$|^[A-Za-z_][A-Za-z0-9_]*\*[A-Za-z0-9_]+$")
"""What a ``build.pass_env`` entry may be: a variable name, optionally with one ``*``."""


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` is one of ``patterns`` (case-sensitive: ``http_proxy`` and
    ``HTTP_PROXY`` are listed separately)."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def passed(environ: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``environ`` a build sees: those matching PASS_ENV or ``extra``."""
    patterns = (*PASS_ENV, *extra)
    return {k: v for k, v in sorted(environ.items()) if matches(k, patterns)}


def child_env(environ: Mapping[str, str], plan_env: Mapping[str, str],
              extra: Iterable[str] = ()) -> dict[str, str]:
    """The full environment of a build child: the passed host variables, then the plan's."""
    return {**passed(environ, extra), **plan_env}
