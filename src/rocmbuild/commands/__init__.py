"""The command layer: one module per command. Each has ``register(sub)``, which adds its parser
(flags from ``common``, defined once), and ``run(args) -> int``, which turns the Namespace into
typed values (through ``rocmbuild.options``), calls the domain API and prints. Only this package
and ``cli.py`` see argparse, print for the user and decide exit codes; domain modules return
values or raise ``rocmbuild.errors``."""

from __future__ import annotations
