"""commands.common.add_setting: every flag backed by a setting is made from its core.options
declaration alone (names, kind, choices, metavar, help with its variable and default), walked
on the real parser of every command."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from rocmbuild.commands import common
from rocmbuild.commands.parser import build_parser
from rocmbuild.commands.registry import COMMANDS
from rocmbuild.core.options import SETTINGS

BY_FLAG = {s.flag: name for name, s in SETTINGS.items()}


def _parsers(p: argparse.ArgumentParser, command: str | None = None
             ) -> Iterator[tuple[str | None, argparse.ArgumentParser]]:
    yield command, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, command or name)


def test_every_setting_flag_comes_from_its_declaration() -> None:
    seen = set()
    for command, p in _parsers(build_parser()):
        for action in p._actions:
            name = next((BY_FLAG[o] for o in action.option_strings if o in BY_FLAG), None)
            if name is None:
                continue
            s, seen = SETTINGS[name], seen | {name}
            assert tuple(action.option_strings) == s.flags, (command, s.flag)
            assert action.help == s.help(command), (command, s.flag)
            assert s.env is None or f"env {s.env}" in action.help
            assert tuple(action.choices or ()) == s.choices
            assert action.metavar == s.metavar
            assert action.default in (None, argparse.SUPPRESS)
            assert (action.type is int) == (s.kind == "int")
    assert seen == set(SETTINGS)  # no declaration without its flag


def test_per_command_help_names_real_commands() -> None:
    for s in SETTINGS.values():
        assert set(s.per_command) <= set(COMMANDS), s.flag


def test_help_defaults_that_are_values_agree_with_the_code() -> None:
    from rocmbuild.commands.recipes import DEFAULT_PYPI
    from rocmbuild.core.options import GPU_VENDORS
    from rocmbuild.sources.drift import DEFAULT_TIMEOUT_S

    assert SETTINGS["pypi"].default == DEFAULT_PYPI
    assert SETTINGS["upstream_timeout"].default == str(DEFAULT_TIMEOUT_S)
    assert SETTINGS["gpu_vendor"].default == GPU_VENDORS[0] == "amd"


def test_add_setting_makes_a_working_flag() -> None:
    p = argparse.ArgumentParser()
    for name in ("jobs", "validate", "gpu_vendor", "wheel_dir"):
        common.add_setting(p, name)
    args = p.parse_args(["-j", "4", "--validate", "--gpu-vendor", "nvidia", "-w", "/tmp/w"])
    assert (args.jobs, args.validate, args.gpu_vendor, args.wheel_dir) == (
        4, True, "nvidia", "/tmp/w")
    assert p.parse_args([]).validate is None  # unset: the variable and pyproject still count
