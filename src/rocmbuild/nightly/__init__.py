"""Nightly rebuilds: a matrix of cells, change detection, one lock, an executor (local or
Slurm), publish to staging and promote on green, reports.

Modules: ``model`` (the typed values every part shares), ``config`` (nightly.toml), ``detect``
(what upstream has now, the build key, build or skip and why), ``lock`` (one nightly per
workspace), ``executors`` (local and Slurm: run a ``Task`` per cell, collect ``CellOutcome``s),
``cell`` (what one task does: build, validate, publish to staging), ``report`` (report.json,
summary.md, index.html, rocmbuild.prom, the webhook) and ``run`` (the controller).
"""
