"""buildtools/preprocessed: the nesting of the conditional directives, which is ours to read (which
groups are on is the real preprocessor's answer: tests/integration/hip/test_preprocessed.py)."""

from __future__ import annotations

from rocmbuild.buildtools import preprocessed

TEXT = """\
#ifndef GUARD_H
#define GUARD_H
int a;
#if defined(USE_X) && \\
    USE_X > 1
int x;
#  ifdef __HIP_DEVICE_COMPILE__
int device_only;
#  endif
#elif 0 /* a comment */
int never;
#else
int other;
#endif
#endif
"""


def test_groups_nest_and_conditions_are_their_own_lines() -> None:
    gs, after, conditions = preprocessed.groups(TEXT)
    assert [(g.first, g.last) for g in gs] == [(2, 14), (6, 9), (8, 8), (11, 11), (13, 13)]
    assert after == [0, 1, 5, 7, 10, 12]  # the top, then the directive (last) lines
    assert [g.mark for g in gs] == [1, 2, 3, 4, 5]
    assert conditions == frozenset({1, 4, 5, 7, 10})


def test_a_comment_left_open_on_a_directive_line_gets_no_pragma() -> None:
    gs, after, _ = preprocessed.groups("#ifdef A /* open\n still */\nint a;\n#endif\n")
    assert after == [0] and [g.mark for g in gs] == [None]
