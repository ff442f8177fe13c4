"""The nightly's reports: the pure renderers (summary.md, the SVG chart, rocmbuild.prom, the
webhook's JSON) and ``write`` over a reports directory with hostile earlier runs. In-process
only; the webhook against a real server and the page in Chromium are in
tests/integration/test_nightly_report_live.py. No GPU here: TFLOP/s values are written by hand."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.nightly.model import RunReport, Validation
from rocmbuild.nightly.report.chart import Point, chart_svg
from rocmbuild.nightly.report.fmt import duration, size
from rocmbuild.nightly.report.history import MAX_REPORT_BYTES, parse_report
from rocmbuild.nightly.report.page import render_page
from rocmbuild.nightly.report.prom import render_prom
from rocmbuild.nightly.report.summary import render_summary
from rocmbuild.nightly.report.webhook import notification
from rocmbuild.nightly.report.write import ReportFiles, write
from tests.nightly_runs import FA, GIT, PROBE, night, outcome, three_nights, write_logs

SVG = "{http://www.w3.org/2000/svg}"


def write_nights(reports: Path, nights: list[RunReport], **kw: object) -> ReportFiles:
    files = None
    for r in nights:
        write_logs(reports, r)
        files = write(reports, r, **kw)  # type: ignore[arg-type]
    assert files is not None
    return files


# ----------------------------------------------------------------------------- summary.md


def test_summary_is_a_table_of_cells_and_deterministic() -> None:
    r = three_nights()[1]
    md = render_summary(r)
    assert md == render_summary(replace(r))
    assert md.startswith(f"# rocmbuild nightly {r.run_id}: FAILED\n")
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| cell | status | end | steps | duration | peak memory | disk | "
                              "wheel | size | cache hits |")
    by_cell = {row.split(" | ")[0][2:]: row for row in rows[1:]}
    assert sorted(by_cell) == sorted([FA, GIT, PROBE])
    probe = by_cell[PROBE]
    assert ("| success | completed | - | 1m 00s | 3.0 GiB | 5.0 MiB | "
            "flash_attn-2.8.3+rocm6.2.gfx942-cp311-cp311-"
            "linux_x86_64.whl | 1.2 MiB | 75% | - |") in probe
    assert f"[log](cells/{PROBE}/log.txt)" in probe
    assert "| failed | failed | - | 1.5 s | - | - |" in by_cell[GIT]
    assert f"- {GIT}: failed: build failed: exit 1" in md
    assert "Lock: took over the stale lock of pid 4242" in md
    assert "Freed by retention: 3.0 GiB." in md


def test_summary_escapes_table_breakers_and_drops_unsafe_log_links() -> None:
    r = night(5, outcome(FA, wheel="a|b\nc.whl", log="../../etc/passwd",
                         reason="line one\nline | two"))
    md = render_summary(r)
    row = next(line for line in md.splitlines() if line.startswith(f"| {FA}"))
    assert "a\\|b c.whl" in row and row.endswith("| - |")  # no link out of the run dir
    assert f"- {FA}: success: line one line | two" in md
    assert "passwd" not in md


def test_units() -> None:
    assert [duration(s) for s in (12.34, 185, 7500)] == ["12.3 s", "3m 05s", "2h 05m"]
    assert [size(n) for n in (None, 512, 1536, 3 << 30)] == ["-", "512 B", "1.5 KiB",
                                                                 "3.0 GiB"]


# ----------------------------------------------------------------------------- the chart


def test_chart_has_axes_labels_lines_and_red_failures() -> None:
    pts = [Point(0, "2026-11-01", 900.0, 175.0, False),
           Point(1, "2026-11-02", 1.5, None, True),
           Point(2, "2026-11-03", 840.0, 190.25, False)]
    svg = chart_svg("x<&>", pts, 3)
    root = ET.fromstring(svg)  # well-formed, and the cell id is escaped
    assert root.get("aria-label") == "duration and TFLOP/s of x<&> over time"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert {"duration (min)", "TFLOP/s", "run started (UTC)"} <= set(texts)
    assert {"2026-11-01", "2026-11-02", "2026-11-03"} <= set(texts)
    assert len(list(root.iter(f"{SVG}polyline"))) == 2  # duration and TFLOP/s
    red = [c for c in root.iter(f"{SVG}circle") if c.get("fill") == "#cc0000"]
    assert len(red) == 2  # the failed run's dot, and the legend's
    ticks = [e.text for e in root.iter(f"{SVG}text") if e.get("class") == "tick"]
    assert "0" in ticks and "10" in ticks and "100" in ticks  # minutes, then TFLOP/s


def test_chart_without_tflops_says_so() -> None:
    svg = chart_svg(PROBE, [Point(0, "2026-11-01", 60.0, None, False)], 1)
    ET.fromstring(svg)
    assert "no value in these runs" in svg and "duration (s)" in svg


def test_page_with_two_runs_a_day_and_no_number() -> None:
    """Two runs on one date are told apart by their times; a NaN TFLOP/s (the controller's, not
    read back: those are checked) is drawn as no value."""
    a = night(1, outcome(FA))
    b = replace(night(1, outcome(FA, tflops=float("nan"))), run_id="20261101T140000Z",
                started="2026-11-01T14:00:00Z")
    page = render_page([b, a])
    svgs = re.findall(r"<svg .*?</svg>", page)
    assert len(svgs) == 1
    root = ET.fromstring(svgs[0])
    texts = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "xtick"]
    assert texts == ["11-01 02:00", "11-01 14:00"]
    assert "nan" not in page.lower() and len(list(root.iter(f"{SVG}polyline"))) == 1


# ----------------------------------------------------------------------------- rocmbuild.prom


def parse_prom(text: str) -> dict[tuple[str, str], float]:
    """Samples by (name, cell label) through prometheus_client's own text parser (the test
    extra installs it)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type == "gauge" and fam.documentation, fam.name
        for s in fam.samples:
            out[(s.name, s.labels.get("cell", ""))] = s.value
    return out


def test_prom_parses_and_carries_history() -> None:
    nights = three_nights()
    text = render_prom(list(reversed(nights)))
    assert text.endswith("\n") and text == render_prom(list(reversed(nights)))
    m = parse_prom(text)
    p = "rocmbuild_nightly_"
    day1, day3 = 1793502600, 1793675400  # 2026-11-01 and -03 at 03:10 UTC
    assert m[(f"{p}cell_duration_seconds", GIT)] == 840.0
    assert m[(f"{p}cell_success", GIT)] == 1 and m[(f"{p}cell_success", FA)] == 1
    assert m[(f"{p}cell_tflops", GIT)] == 190.25
    assert m[(f"{p}cell_tflops", FA)] == 180.5  # skipped: carried from night 1's build
    assert (f"{p}cell_tflops", PROBE) not in m  # never measured
    assert m[(f"{p}cell_compile_cache_hit_ratio", GIT)] == 0.9
    assert m[(f"{p}cell_last_success_timestamp_seconds", GIT)] == day3
    assert m[(f"{p}cell_last_success_timestamp_seconds", FA)] == day1  # skipped since
    assert m[(f"{p}cell_last_success_timestamp_seconds", PROBE)] == day3 - 86400
    assert m[(f"{p}run_success", "")] == 1 and m[(f"{p}last_run_timestamp_seconds", "")] == day3
    # night 2 alone: the failed cell is 0 and keeps night 1's last success
    m2 = parse_prom(render_prom([nights[1], nights[0]]))
    assert m2[(f"{p}cell_success", GIT)] == 0 and m2[(f"{p}run_success", "")] == 0
    assert m2[(f"{p}cell_last_success_timestamp_seconds", GIT)] == day1
    assert m2[(f"{p}freed_bytes", "")] == 3 << 30


def test_prom_escapes_label_values() -> None:
    odd = 'a"b\\c\nd'
    text = render_prom([night(4, outcome(odd))])
    assert 'cell="a\\"b\\\\c\\nd"' in text
    m = parse_prom(text)
    assert m[("rocmbuild_nightly_cell_success", odd)] == 1
    for line in text.splitlines():  # HELP and TYPE lines come before their samples
        assert line.startswith(("# HELP rocmbuild_nightly_", "# TYPE rocmbuild_nightly_",
                                "rocmbuild_nightly_"))


# ----------------------------------------------------------------------------- the webhook's JSON


def test_notification_failure_recovery_and_quiet(tmp_path: Path) -> None:
    n1, n2, n3 = three_nights()
    assert notification([n1], tmp_path) is None  # all green: quiet
    fail = notification([n2, n1], tmp_path)
    assert fail is not None and fail["event"] == "failure" and fail["failed"] == [GIT]
    assert fail["changed"] == [{"cell": GIT, "was": "success", "now": "failed"}]
    assert fail["summary"] == str(tmp_path / n2.run_id / "summary.md")
    rec = notification([n3, n2, n1], tmp_path)
    assert rec is not None and rec["event"] == "recovery" and rec["recovered"] == [GIT]
    assert rec["changed"] == [{"cell": GIT, "was": "failed", "now": "success"}]
    # still failing: a failure to report, but no change of state
    again = notification([replace(n2, run_id="20261104T020000Z"), n2, n1], tmp_path)
    assert again is not None and again["event"] == "failure" and again["changed"] == []
    # the last build failed, later nights skipped it (none), now it builds: a recovery
    skip = night(9, outcome(GIT, Status.SKIPPED))
    assert notification([n3, skip, n2], tmp_path)["recovered"] == [GIT]  # type: ignore


# ----------------------------------------------------------------------------- write()


def test_write_three_nights(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    files = write_nights(reports, three_nights())
    assert files.runs == 3 and files.event == "recovery" and not files.notified
    n3 = three_nights()[2]
    assert parse_report(json.loads(files.report.read_text())) == n3  # round trip
    assert files.summary.read_text() == render_summary(n3)
    page = files.page.read_text()
    runs = [n.run_id for n in reversed(three_nights())]
    assert [page.index(f">{r}</a>") for r in runs] == sorted(page.index(f">{r}</a>")
                                                           for r in runs)  # newest first
    assert page.count("<svg") == 3 and page.count("<table class='history'>") == 3
    # peak memory and disk of each build, in its cell's history table
    assert "<td class='num'>3.0 GiB</td><td class='num'>5.0 MiB</td>" in page
    for r in runs:
        assert f'href="{r}/summary.md"' in page
        assert f'href="{r}/cells/{GIT}/log.txt"' in page
    assert files.prom.read_text() == render_prom(list(reversed(three_nights())))
    assert not [p for p in reports.rglob(".tmp-*")]  # atomic writes leave nothing behind


def test_write_is_deterministic_and_history_is_bounded(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    fa, fb = write_nights(a, three_nights()), write_nights(b, three_nights())
    for x, y in ((fa.page, fb.page), (fa.prom, fb.prom), (fa.report, fb.report),
                 (fa.summary, fb.summary)):
        assert x.read_bytes() == y.read_bytes(), x.name
    again = write(a, three_nights()[2])  # rewriting the same run changes nothing
    assert again.page.read_bytes() == fb.page.read_bytes()
    two = write(a, three_nights()[2], history=2)
    assert two.runs == 2 and "20261101T020000Z" not in two.page.read_text()


def test_hostile_history_is_skipped_with_warnings(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    n1, n2, n3 = three_nights()
    write_nights(reports, [n1, n2])
    # each bad report in a directory named like a run (20261120T020000Z ...): read, refused
    names = ["broken", "huge", "notobj", "badcell", "negative", "other", "linked", "fifo"]
    rid = {n: f"202611{20 + i}T020000Z" for i, n in enumerate(names)}
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(replace(n1, run_id=rid["linked"]).to_json()))
    bad = {
        "broken": b"{not json",
        "huge": b" " * (MAX_REPORT_BYTES + 1) + b"{}",
        "notobj": b"[1, 2]",
        "badcell": json.dumps({**n1.to_json(), "run": rid["badcell"],
                               "cells": [{**n1.outcomes[0].to_json(),
                                          "cell": "[/bold] ../x"}]}).encode(),
        "negative": json.dumps({**n1.to_json(), "run": rid["negative"],
                                "freed_bytes": -1}).encode(),
        "other": json.dumps(n1.to_json()).encode(),  # names another run
    }
    for name, data in bad.items():
        (reports / rid[name]).mkdir()
        (reports / rid[name] / "report.json").write_bytes(data)
    (reports / rid["linked"]).mkdir()
    (reports / rid["linked"] / "report.json").symlink_to(outside)
    (reports / rid["fifo"]).mkdir()
    os.mkfifo(reports / rid["fifo"] / "report.json")  # would hang a plain open()
    (reports / "20261130T020000Z").symlink_to(reports / n1.run_id)
    (reports / "not-a-run").mkdir()  # not a run's name: not read at all
    (reports / "not-a-run" / "report.json").write_text("{")
    # a valid report whose strings try to break out of the page, and whose log leaves the dir
    evil = night(4, outcome(FA, reason="<script>alert(1)</script>", wheel="<b>w</b>.whl",
                            log="../../../outside.json"), executor="<i>x</i>")
    (reports / evil.run_id).mkdir()
    (reports / evil.run_id / "report.json").write_text(json.dumps(evil.to_json()))
    n3_later = replace(n3, run_id="20261105T020000Z", started="2026-11-05T02:00:00Z")
    files = write(reports, n3_later)  # the warnings are printed (rich markup escaped)
    assert "cell id '[/bold] ../x' is not a cell id" in capsys.readouterr().err
    by_dir = {v: k for k, v in rid.items()}
    skipped = sorted(by_dir[w.split("/reports/")[1].split("/")[0]] for w in files.warnings)
    assert skipped == sorted(names)
    assert files.runs == 4  # n1, n2, evil and this one
    page = files.page.read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>w</b>" not in page and "<i>x</i>" not in page
    assert "outside.json" not in page and rid["linked"] not in page
    assert "evil" not in files.prom.read_text()


def test_bad_run_id_or_time_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RocmbuildError, match="run id '../x' cannot be a directory name"):
        write(tmp_path, replace(night(1), run_id="../x"))
    with pytest.raises(RocmbuildError, match="started 'yesterday' is not an ISO 8601 time"):
        write(tmp_path, replace(night(1), started="yesterday"))
    assert list(tmp_path.iterdir()) == []


def test_unwritable_reports_dir_is_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(RocmbuildError) as exc:
        write(tmp_path / "file" / "reports", night(1))
    assert "is a file, not a directory" in str(exc.value) and exc.value.hint


# ----------------------------------------------------------------------------- two steps apart


def test_build_and_validation_shown_apart() -> None:
    """A cell built but not validated (pending), one validated, one whose validation failed:
    summary.md, the page and rocmbuild.prom tell the two steps apart, and the run is ok (a
    pending wheel is built and in staging, only not promoted)."""
    r = night(6, outcome(FA, validation=Validation.PENDING,
                         reason="built, NOT VALIDATED (pending)"),
              outcome(GIT, validation=Validation.PASSED, promoted=True),
              outcome(PROBE, Status.FAILED, validation=Validation.FAILED,
                      reason="validation failed"))
    md = render_summary(r)
    rows = {row.split(" | ")[0][2:]: row for row in md.splitlines() if row.startswith("| ")}
    assert "| built, pending validation |" in rows[FA]
    assert "| built, validated |" in rows[GIT]
    assert "| built, validation failed |" in rows[PROBE]
    assert f"Pending validation (built and in staging, not promoted): {FA}." in md
    assert "--validate-pending" in md
    assert "1 built and pending validation" in md
    page = render_page([r], frozenset())
    assert "<th>steps</th>" in page and "built, pending validation" in page
    m = parse_prom(render_prom([r]))
    p = "rocmbuild_nightly_"
    assert m[(f"{p}cell_built", FA)] == 1 and m[(f"{p}cell_built", PROBE)] == 1
    assert m[(f"{p}cell_validated", FA)] == 0 and m[(f"{p}cell_validated", GIT)] == 1
    assert m[(f"{p}cell_validated", PROBE)] == 0
    assert m[(f"{p}cell_validation_pending", FA)] == 1
    assert m[(f"{p}cell_validation_pending", GIT)] == 0
    # a build that failed: not built, its validation not reached (no sample)
    m2 = parse_prom(render_prom([night(7, outcome(GIT, Status.FAILED))]))
    assert m2[(f"{p}cell_built", GIT)] == 0 and (f"{p}cell_validated", GIT) not in m2
    # read back: the validation survives report.json, a bad value is refused
    back = parse_report(json.loads(json.dumps(r.to_json())))
    assert [o.validation.value for o in back.outcomes] == ["pending", "passed", "failed"]
    bad = r.to_json()
    bad["cells"][0]["validation"] = "maybe"
    with pytest.raises(ValueError, match="validation"):
        parse_report(bad)
