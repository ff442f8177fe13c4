"""Per-arch views (publish/views.py) of wheels whose HIP libraries the real compiler built here
(the session's ``objs``: plain and compressed offload bundles, two TUs in one .so). Only the
GPU is missing: the code objects are never run."""

from __future__ import annotations

from pathlib import Path

from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.publish.views import arch_views
from tests.integration.hip.conftest import make_wheel


def _views(tmp_path: Path, label: str, members: dict[str, bytes | Path]) -> tuple[str, ...]:
    path = make_wheel(tmp_path / f"demo-1.0+{label}-cp311-cp311-linux_x86_64.whl", members)
    return arch_views(read_wheel(path))


def test_views_follow_the_compiled_code(objs: dict[str, Path], tmp_path: Path) -> None:
    assert _views(tmp_path, "one", {"demo/_one.so": objs["one.so"]}) == ("gfx942",)
    # CCOB-compressed bundle for two archs; a feature (xnack+) does not split the view
    assert _views(tmp_path, "comp", {"demo/_c.so": objs["comp.so"]}) == ("gfx90a", "gfx942")
    assert _views(tmp_path, "two", {"demo/_t.so": objs["two.so"]}) == ("gfx90a", "gfx942")
    assert _views(tmp_path, "multi", {"demo/_m.so": objs["multi.so"]}) == ("gfx90a", "gfx942")
    # every GPU library must cover the arch: a gfx942-only one takes gfx90a away
    assert _views(tmp_path, "mixed", {"demo/_c.so": objs["comp.so"],
                                      "demo/_one.so": objs["one.so"]}) == ("gfx942",)
    # a CPU-only library is not device code and changes nothing
    assert _views(tmp_path, "host", {"demo/_c.so": objs["comp.so"],
                                     "demo/_h.so": objs["host.so"]}) == ("gfx90a", "gfx942")
    # no device code and no rocmbuild provenance: not a ROCm wheel, in no arch view
    assert _views(tmp_path, "cpu", {"demo/_h.so": objs["host.so"]}) == ()
