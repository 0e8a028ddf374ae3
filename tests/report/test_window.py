"""--since / --until parsing and UTC periods (pure)."""

from __future__ import annotations

import pytest

from andreas.errors import InputError
from andreas.report.window import Window, make_window, overlap_s, parse_time, periods

NOW = 1_800_000_000.0                  # 2027-01-15 08:00Z


@pytest.mark.parametrize("text, expected", [
    ("now", NOW), ("-7d", NOW - 7 * 86400), ("-1h30m", NOW - 5400), ("-2w", NOW - 14 * 86400),
    ("2027-01-15", 1_799_971_200.0), ("2027-01-15T08:00Z", NOW),
    ("2027-01-15T09:00+01:00", NOW), ("2027-01-15 08:00", NOW), ("1800000000", NOW)])
def test_parse_time(text, expected):
    assert parse_time(text, NOW, "--since") == expected


@pytest.mark.parametrize("text", ["yesterday", "-7x", "7d", "2027-13-01", "-", ""])
def test_bad_time_names_option_and_value(text):
    with pytest.raises(InputError) as e:
        parse_time(text, NOW, "--until")
    assert str(e.value).startswith(f"--until {text!r}: ")


def test_window_order_and_defaults():
    w = make_window(None, None, NOW)
    assert (w.since_s, w.until_s) == (NOW - 7 * 86400, NOW)
    with pytest.raises(InputError, match=r"^--since '-1d' .* is not before --until '-2d'"):
        make_window("-1d", "-2d", NOW)
    with pytest.raises(InputError, match="is not before"):
        make_window("now", "now", NOW)


def test_periods_are_utc_days_and_iso_weeks_clipped_to_the_window():
    w = Window(since_s=NOW, until_s=NOW + 2 * 86400, now_s=NOW)
    days = periods(w, "day")
    assert [d.label for d in days] == ["2027-01-15", "2027-01-16", "2027-01-17"]
    assert days[0].start_s == NOW and days[-1].end_s == NOW + 2 * 86400
    assert sum(d.end_s - d.start_s for d in days) == 2 * 86400
    weeks = periods(Window(since_s=NOW, until_s=NOW + 9 * 86400, now_s=NOW), "week")
    assert [x.label for x in weeks] == ["2027-W02", "2027-W03"]   # Mon 2027-01-18 starts W03
    assert weeks[0].end_s == 1_800_230_400.0
    with pytest.raises(InputError, match="--by 'month'"):
        periods(w, "month")


def test_overlap():
    assert overlap_s(0, 10, 5, 20) == 5 and overlap_s(0, 10, 10, 20) == 0
