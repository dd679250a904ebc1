import datetime

import pytest

from planwise.dates import (
    DateRange,
    add_business_days,
    add_months,
    age_on,
    business_days_between,
    every,
    is_business_day,
    iso_week_label,
    month_end,
    monthly_on_nth_weekday,
    next_business_day,
    nth_weekday,
    quarter,
    weekday_number,
)

D = datetime.date
NEW_YEAR = D(2024, 1, 1)


def test_range_length_iteration_membership():
    r = DateRange(D(2024, 2, 27), D(2024, 3, 2))
    assert len(r) == 5
    assert list(r)[2] == D(2024, 2, 29)
    assert D(2024, 3, 2) in r
    assert D(2024, 3, 3) not in r
    assert "2024-03-01" not in r
    assert len(DateRange(NEW_YEAR, NEW_YEAR)) == 1


def test_range_rejects_reversed():
    with pytest.raises(ValueError, match="before start"):
        DateRange(D(2024, 1, 2), NEW_YEAR)


def test_range_overlap_and_intersection():
    a = DateRange(D(2024, 1, 1), D(2024, 1, 10))
    b = DateRange(D(2024, 1, 10), D(2024, 1, 20))
    c = DateRange(D(2024, 1, 11), D(2024, 1, 12))
    assert a.overlaps(b)
    assert not a.overlaps(c)
    assert a.intersection(b) == DateRange(D(2024, 1, 10), D(2024, 1, 10))
    assert a.intersection(c) is None
    assert repr(c) == "DateRange(2024-01-11..2024-01-12)"


def test_split_by_month():
    parts = DateRange(D(2024, 1, 30), D(2024, 3, 1)).split_by_month()
    assert parts == [DateRange(D(2024, 1, 30), D(2024, 1, 31)), DateRange(D(2024, 2, 1), D(2024, 2, 29)),
                     DateRange(D(2024, 3, 1), D(2024, 3, 1))]


def test_weeks_monday_to_sunday():
    parts = DateRange(D(2024, 1, 3), D(2024, 1, 16)).weeks()
    assert [(p.start.day, p.end.day) for p in parts] == [(3, 7), (8, 14), (15, 16)]


@pytest.mark.parametrize("day, end", [(D(2024, 2, 10), D(2024, 2, 29)), (D(2023, 2, 1), D(2023, 2, 28)),
                                      (D(2024, 12, 31), D(2024, 12, 31))])
def test_month_end(day, end):
    assert month_end(day) == end


@pytest.mark.parametrize(
    "day, months, expected",
    [(D(2024, 1, 31), 1, D(2024, 2, 29)), (D(2023, 1, 31), 1, D(2023, 2, 28)), (D(2024, 11, 15), 2, D(2025, 1, 15)),
     (D(2024, 3, 31), -1, D(2024, 2, 29)), (D(2024, 1, 15), -13, D(2022, 12, 15)), (D(2024, 5, 5), 0, D(2024, 5, 5)),
     (D(2024, 12, 1), 1, D(2025, 1, 1))],
)
def test_add_months(day, months, expected):
    assert add_months(day, months) == expected


def test_is_business_day():
    assert is_business_day(D(2024, 1, 5))
    assert not is_business_day(D(2024, 1, 6))
    assert not is_business_day(D(2024, 1, 7))
    assert not is_business_day(NEW_YEAR, holidays={NEW_YEAR})


def test_business_days_between():
    assert business_days_between(D(2024, 1, 5), D(2024, 1, 8)) == 1
    assert business_days_between(D(2024, 1, 1), D(2024, 1, 31)) == 22
    assert business_days_between(D(2024, 1, 1), D(2024, 1, 31), holidays={D(2024, 1, 15)}) == 21
    assert business_days_between(D(2024, 1, 8), D(2024, 1, 5)) == -1
    assert business_days_between(NEW_YEAR, NEW_YEAR) == 0


@pytest.mark.parametrize(
    "start, count, expected",
    [(D(2024, 1, 5), 1, D(2024, 1, 8)), (D(2024, 1, 5), 5, D(2024, 1, 12)), (D(2024, 1, 8), -1, D(2024, 1, 5)),
     (D(2024, 1, 6), 0, D(2024, 1, 6)), (D(2024, 1, 3), 2, D(2024, 1, 5))],
)
def test_add_business_days(start, count, expected):
    assert add_business_days(start, count) == expected


def test_add_business_days_skips_holidays():
    assert add_business_days(D(2023, 12, 29), 1, holidays={NEW_YEAR}) == D(2024, 1, 2)


def test_next_business_day():
    assert next_business_day(D(2024, 1, 6)) == D(2024, 1, 8)
    assert next_business_day(D(2024, 1, 5)) == D(2024, 1, 5)


@pytest.mark.parametrize("name, number", [("Monday", 0), ("tue", 1), (" SUNDAY ", 6), ("fri", 4)])
def test_weekday_number(name, number):
    assert weekday_number(name) == number


def test_weekday_number_unknown():
    with pytest.raises(ValueError, match="unknown weekday"):
        weekday_number("funday")


@pytest.mark.parametrize(
    "n, expected",
    [(1, D(2024, 2, 6)), (2, D(2024, 2, 13)), (4, D(2024, 2, 27)), (5, None), (-1, D(2024, 2, 27)),
     (-4, D(2024, 2, 6)), (-5, None)],
)
def test_nth_weekday_tuesdays_feb_2024(n, expected):
    assert nth_weekday(2024, 2, 1, n) == expected


@pytest.mark.parametrize("n", [0, 6, -6])
def test_nth_weekday_rejects_bad_n(n):
    with pytest.raises(ValueError):
        nth_weekday(2024, 2, 1, n)


def test_monthly_on_nth_weekday():
    dates = monthly_on_nth_weekday(D(2024, 1, 10), weekday=1, n=2, count=3)
    assert dates == [D(2024, 2, 13), D(2024, 3, 12), D(2024, 4, 9)]


def test_monthly_fifth_friday_skips_months_and_crosses_year():
    dates = monthly_on_nth_weekday(D(2024, 11, 1), weekday=4, n=5, count=2)
    assert dates == [D(2024, 11, 29), D(2025, 1, 31)]
    assert monthly_on_nth_weekday(D(2024, 11, 1), 4, 5, 0) == []
    with pytest.raises(ValueError):
        monthly_on_nth_weekday(D(2024, 11, 1), 4, 5, -1)


def test_every():
    assert every(NEW_YEAR, 7, D(2024, 1, 22)) == [D(2024, 1, 1), D(2024, 1, 8), D(2024, 1, 15), D(2024, 1, 22)]
    assert every(NEW_YEAR, 1, D(2023, 12, 31)) == []
    with pytest.raises(ValueError):
        every(NEW_YEAR, 0, D(2024, 2, 1))


@pytest.mark.parametrize("day, label", [(D(2024, 1, 1), "2024-W01"), (D(2021, 1, 3), "2020-W53"),
                                        (D(2024, 12, 30), "2025-W01"), (D(2024, 3, 4), "2024-W10")])
def test_iso_week_label(day, label):
    assert iso_week_label(day) == label


@pytest.mark.parametrize("month, q", [(1, 1), (3, 1), (4, 2), (6, 2), (7, 3), (10, 4), (12, 4)])
def test_quarter(month, q):
    assert quarter(D(2024, month, 1)) == q


def test_age_on():
    birth = D(2000, 2, 29)
    assert age_on(birth, D(2024, 2, 28)) == 23
    assert age_on(birth, D(2024, 2, 29)) == 24
    assert age_on(birth, D(2023, 3, 1)) == 23
    assert age_on(birth, birth) == 0
    with pytest.raises(ValueError):
        age_on(birth, D(1999, 1, 1))
