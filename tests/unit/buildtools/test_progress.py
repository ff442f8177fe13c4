"""progress.py: ninja's status lines, the ETA arithmetic (measured rate, a previous build's
.ninja_log, both), a .ninja_log read as untrusted input, and the plain lines a log gets. Times
are passed in, so the arithmetic is checked exactly; no process is started."""

from __future__ import annotations

import pytest

from rocmbuild.buildtools import progress
from rocmbuild.buildtools.progress import Display, Eta, Status, duration, parse, read_ninja_log


def test_parse_default_and_rocmbuild_status() -> None:
    assert parse("[3/20] Building CXX object CMakeFiles/x.dir/a.cpp.o") == Status(3, 20, None)
    assert parse("[3/20 4] Building CXX object a.o") == Status(3, 20, 4)
    assert parse("  [12/697 16] /usr/bin/c++ -c a.cpp -o a.o") == Status(12, 697, 16)
    for line in ("[1/7] build", "compiling [3/20]", "[a/b] x", "[3/] x", ""):
        assert parse(line) is None or line == "[1/7] build"  # a stage header parses too
    assert progress.NINJA_STATUS == "[%f/%t %r] "


def test_rate_eta_needs_a_few_units_then_extrapolates() -> None:
    eta = Eta(jobs=4)
    eta.observe(100.0, Status(1, 101, 4))
    eta.observe(102.0, Status(2, 101, 4))
    eta.observe(104.0, Status(3, 101, 4))
    assert eta.rate_eta(104.0) is None  # 2 units after the first: not yet
    eta.observe(106.0, Status(4, 101, 4))
    # 3 units in 6 s since the first finished: 2 s a unit, 97 left
    assert eta.rate_eta(106.0) == pytest.approx(97 * 2.0)
    assert eta.estimate(106.0) == (pytest.approx(194.0), "rate")


def test_a_new_ninja_run_starts_the_rate_again() -> None:
    eta = Eta(jobs=2)
    for i, t in enumerate((0.0, 1.0, 2.0, 3.0, 4.0), 1):
        eta.observe(t, Status(i, 5, 1))
    eta.observe(50.0, Status(1, 10, 2))  # the next extension's ninja: its own total
    assert eta.rate_eta(50.0) is None
    for i in range(2, 5):
        eta.observe(50.0 + 10 * (i - 1), Status(i, 10, 2))
    assert eta.rate_eta(80.0) == pytest.approx(6 * 10.0)


NINJA_LOG = "# ninja log v5\n" + "".join(
    f"{i * 1000}\t{i * 1000 + d}\t0\tCMakeFiles/x.dir/u{i}.cpp.o\tdeadbeef\n"
    for i, d in enumerate((10000, 20000, 30000, 40000))) + "garbage\tline\n1\t0\t0\tneg\th\n"


def test_read_ninja_log_is_untrusted() -> None:
    times = read_ninja_log(NINJA_LOG + "5\t6\t7\n\tx\ty\tz\tw\nab\t1\t0\tbad\th\n")
    assert times == {f"CMakeFiles/x.dir/u{i}.cpp.o": s for i, s in
                     enumerate((10.0, 20.0, 30.0, 40.0))}
    # the last entry of an output wins (ninja appends when a unit is rebuilt)
    assert read_ninja_log("0\t1000\t0\ta.o\th\n0\t3000\t0\ta.o\th\n") == {"a.o": 3.0}


def test_eta_from_a_previous_ninja_log() -> None:
    """Before the rate is known: the previous build's times of the units not finished / jobs,
    units matched by their output in ninja's line."""
    eta = Eta(jobs=2, previous=read_ninja_log(NINJA_LOG))
    eta.observe(0.0, Status(1, 4, 2), "[1/4 2] Building CXX object CMakeFiles/x.dir/u3.cpp.o")
    # left: u0, u1, u2 = 10 + 20 + 30 s on 2 jobs
    assert eta.estimate(0.0) == (pytest.approx(30.0), "previous build")
    eta.observe(1.0, Status(2, 4, 2), "[2/4 2] Building CXX object CMakeFiles/x.dir/u0.cpp.o")
    assert eta.previous_eta() == pytest.approx(25.0)


def test_eta_from_a_previous_log_without_matching_names_uses_its_mean() -> None:
    eta = Eta(jobs=5, previous=read_ninja_log(NINJA_LOG))  # mean 25 s a unit
    eta.observe(0.0, Status(2, 12, 5), "[2/12 5] /usr/bin/c++ -c other.cpp -o other.o")
    assert eta.previous_eta() == pytest.approx(10 * 25.0 / 5)


def test_rate_and_previous_are_weighted_by_the_fraction_done() -> None:
    eta = Eta(jobs=1, previous={"a.o": 100.0, "b.o": 100.0, "c.o": 100.0, "d.o": 100.0,
                                "e.o": 100.0, "f.o": 100.0, "g.o": 100.0, "h.o": 100.0})
    for i, out in enumerate(("a.o", "b.o", "c.o", "d.o"), 1):
        eta.observe(10.0 * i, Status(i, 8, 1), f"[{i}/8 1] x {out}")
    rate = 4 * (40.0 - 10.0) / 3  # 4 left at 10 s a unit
    prev = 400.0  # e..h at 100 s, 1 job
    left, how = eta.estimate(40.0)
    assert how == "rate + previous build"
    assert left == pytest.approx(0.5 * rate + 0.5 * prev)


def test_no_status_no_eta() -> None:
    assert Eta(jobs=8).estimate(5.0) == (None, "")
    assert Eta(jobs=8, previous={"a.o": 1.0}).estimate(5.0) == (None, "")


def test_duration() -> None:
    assert [duration(s) for s in (0, 44.6, 60, 723, 3600, 11220)] == [
        "0s", "45s", "1m00s", "12m03s", "1h00m", "3h07m"]


def test_plain_lines_at_each_tenth_with_n_m_running_and_eta() -> None:
    """Not a terminal: a line at each 10 % of the units (the timer's hour never comes)."""
    said: list[str] = []
    shown = Display("building x (default, MAX_JOBS=2)", 2, emit=said.append, tty=False,
                    every=3600, sample=60)
    try:
        shown("-- configuring")
        for i in range(1, 21):
            shown(f"[{i}/20 2] Building CXX object u{i}.o")
    finally:
        shown.stop()
    assert len(said) == 9, said  # 10 %, 20 %, ... 90 %; not 100 % (the stage reports that)
    assert said[0].startswith("  building x (default, MAX_JOBS=2): [2/20] 10 %, 2 running, ")
    assert all(" elapsed" in s for s in said)
    assert all("ETA " in s and "(rate)" in s for s in said[1:]), said
    assert "lines" in shown.line() or "[20/20]" in shown.line()


def test_plain_line_before_ninja_counts_lines() -> None:
    shown = Display("b", 1, emit=lambda s: None, tty=False, every=3600, sample=60)
    try:
        shown("running setup.py")
        shown("copying x")
        assert shown.line(shown.start + 5).startswith("2 lines, 5s elapsed")
    finally:
        shown.stop()


def test_tree_rss_of_a_fixture_proc(tmp_path) -> None:
    """A /proc fixture tree (pid 10 -> 11 -> 12, 13 elsewhere): the descendants' RSS."""
    page = progress.os.sysconf("SC_PAGE_SIZE")
    for pid, ppid, pages in ((10, 1, 100), (11, 10, 5), (12, 11, 7), (13, 1, 1000)):
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_text(f"{pid} (cc1 (x) y) S {ppid} 0 0\n")
        (d / "statm").write_text(f"999 {pages} 0\n")
    (tmp_path / "self").mkdir()
    assert progress.tree_rss(10, tmp_path) == (5 + 7) * page
    assert progress.tree_rss(99, tmp_path) == 0


def test_kept_ninja_logs_feed_the_next_builds_eta(tmp_path) -> None:
    """The build stage's file side: every .ninja_log the build wrote in the tree (cmake's build
    dir, cpp_extension's build/temp.*) is kept as one build.ninja_log next to build.log; one
    older than the build is not; the next build of the recipe (another key) reads the newest."""
    import os
    import time

    from rocmbuild.stages.build import NINJA_LOG, keep_ninja_log, previous_ninja_log

    tree = tmp_path / "tree"
    (tree / "_rocmbuild_cmake").mkdir(parents=True)
    (tree / "build/temp.linux-x86_64-cpython-311").mkdir(parents=True)
    (tree / "old").mkdir()
    (tree / "_rocmbuild_cmake/.ninja_log").write_text("# ninja log v5\n0\t2000\t0\ta.o\th\n")
    (tree / "build/temp.linux-x86_64-cpython-311/.ninja_log").write_text(
        "# ninja log v5\n0\t4000\t0\t/abs/b.o\th\n")
    (tree / "old/.ninja_log").write_text("# ninja log v5\n0\t9000\t0\tstale.o\th\n")
    since = time.time() - 60
    os.utime(tree / "old/.ninja_log", (since - 3600, since - 3600))
    logs = tmp_path / "logs/recipe"
    (logs / "key1").mkdir(parents=True)
    assert keep_ninja_log(tree, logs / "key1", since) == logs / "key1" / NINJA_LOG
    assert previous_ninja_log(logs / "key2") == {"a.o": 2.0, "/abs/b.o": 4.0}
    assert keep_ninja_log(tmp_path / "logs", logs / "key1", time.time() + 60) is None
    assert previous_ninja_log(tmp_path / "elsewhere/key") == {}
