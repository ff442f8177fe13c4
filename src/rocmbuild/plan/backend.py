"""What a recipe's backend runs, and the placeholders in its strings: ``fill`` resolves
``{archs}``, ``{jobs}``, ``{rocm_path}``... against the plan's values; ``cmake_configure`` is the
cmake backend's configure command (``plan --units`` runs it too); ``backend_commands`` the
backend's commands (pip wheel --no-build-isolation, or cmake configure + build + install, or
configure + build + pip wheel with build.cmake_wheel = "pip-wheel")."""

from __future__ import annotations

from collections.abc import Mapping

from rocmbuild.core.errors import ToolchainError
from rocmbuild.recipe.model import Recipe


def fill(template: str, values: Mapping[str, str], where: str) -> str:
    try:
        return template.format_map(values)
    except KeyError as exc:  # a placeholder that needs something the host does not have
        raise ToolchainError(
            f"{where}: {{{exc.args[0]}}} cannot be resolved on this host",
            hint="run `rocmbuild doctor` to see what is missing",
        ) from exc


def cmake_configure(recipe: Recipe, values: Mapping[str, str]) -> tuple[str, ...]:
    """The cmake backend's configure command (its first), run in the tree: build directory
    ``_rocmbuild_cmake``, install prefix ``{stage_dir}``. ``plan --units`` ("ninja") runs the
    same command."""
    where = f"{recipe.path.name}: build.cmake_args"
    return (
        "cmake", "-S", recipe.source_dir or ".", "-B", "_rocmbuild_cmake", "-G", "Ninja",
        "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_HIP_PLATFORM=amd",
        f"-DCMAKE_HIP_ARCHITECTURES={values['archs']}",
        f"-DCMAKE_HIP_COMPILER={fill('{hip_compiler}', values, where)}",
        f"-DCMAKE_HIP_FLAGS={values.get('hip_flags', '')}",
        "-DCMAKE_INSTALL_PREFIX={stage_dir}",
        *(fill(a, values, where) for a in recipe.cmake_args),
    )


def backend_commands(recipe: Recipe, values: Mapping[str, str]) -> tuple[tuple[str, ...], ...]:
    """The backend's commands. ``python`` is this interpreter; ``{wheel_tmp}`` and
    ``{stage_dir}`` are directories the build stage makes inside the tree."""
    wheel_cmd = ["python", "-m", "pip", "wheel", "-v", "--no-deps", "--no-cache-dir"]
    if recipe.no_build_isolation:
        wheel_cmd.append("--no-build-isolation")
    pip_wheel = tuple([*wheel_cmd, *recipe.pip_args, "-w", "{wheel_tmp}", "."])
    if recipe.backend == "cmake":
        built = (cmake_configure(recipe, values),
                 ("cmake", "--build", "_rocmbuild_cmake"))  # -j from CMAKE_BUILD_PARALLEL_LEVEL
        if recipe.cmake_wheel == "pip-wheel":  # the project's own setup packages the tree
            return (*built, pip_wheel)
        return (*built, ("cmake", "--install", "_rocmbuild_cmake"))
    return (pip_wheel,)
