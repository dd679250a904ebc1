"""Date ranges, business days, month arithmetic and recurrence rules."""

from __future__ import annotations

import calendar
import datetime
from typing import Container, Iterator, Optional

ONE_DAY = datetime.timedelta(days=1)
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKEND = frozenset({5, 6})


class DateRange:
    """Every day from ``start`` to ``end``, both included."""

    def __init__(self, start: datetime.date, end: datetime.date) -> None:
        """Create the range; ``end`` may not be before ``start``."""
        if end < start:
            raise ValueError(f"range end {end.isoformat()} is before start {start.isoformat()}")
        self.start = start
        self.end = end

    def __len__(self) -> int:
        """Number of days, counting both ends."""
        return (self.end - self.start).days + 1

    def __iter__(self) -> Iterator[datetime.date]:
        """The days in order."""
        day = self.start
        while day <= self.end:
            yield day
            day += ONE_DAY

    def __contains__(self, day: object) -> bool:
        """True for a date inside the range."""
        return isinstance(day, datetime.date) and self.start <= day <= self.end

    def __eq__(self, other: object) -> bool:
        """Same start and end."""
        if not isinstance(other, DateRange):
            return NotImplemented
        return (self.start, self.end) == (other.start, other.end)

    def __repr__(self) -> str:
        """``DateRange(2024-01-01..2024-01-31)``."""
        return f"DateRange({self.start.isoformat()}..{self.end.isoformat()})"

    def overlaps(self, other: DateRange) -> bool:
        """True when at least one day is in both ranges."""
        return self.start <= other.end and other.start <= self.end

    def intersection(self, other: DateRange) -> Optional[DateRange]:
        """Days in both ranges, or None."""
        if not self.overlaps(other):
            return None
        return DateRange(max(self.start, other.start), min(self.end, other.end))

    def split_by_month(self) -> list[DateRange]:
        """The range cut at month boundaries, e.g. for monthly billing."""
        pieces = []
        start = self.start
        while start <= self.end:
            end = min(month_end(start), self.end)
            pieces.append(DateRange(start, end))
            start = end + ONE_DAY
        return pieces

    def weeks(self) -> list[DateRange]:
        """The range cut into Monday-to-Sunday weeks (the first and last may be partial)."""
        pieces = []
        start = self.start
        while start <= self.end:
            end = min(start + datetime.timedelta(days=6 - start.weekday()), self.end)
            pieces.append(DateRange(start, end))
            start = end + ONE_DAY
        return pieces


def month_end(day: datetime.date) -> datetime.date:
    """The last day of ``day``'s month."""
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def add_months(day: datetime.date, months: int) -> datetime.date:
    """Shift by whole months, clamping to the month's last day (Jan 31 + 1 -> Feb 28/29)."""
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return datetime.date(year, month + 1, min(day.day, last))


def is_business_day(day: datetime.date, holidays: Container[datetime.date] = ()) -> bool:
    """True for a weekday that is not a holiday."""
    return day.weekday() not in WEEKEND and day not in holidays


def business_days_between(start: datetime.date, end: datetime.date,
                          holidays: Container[datetime.date] = ()) -> int:
    """Business days after ``start`` up to and including ``end`` (negative when reversed)."""
    if end < start:
        return -business_days_between(end, start, holidays)
    count = 0
    day = start + ONE_DAY
    while day <= end:
        if is_business_day(day, holidays):
            count += 1
        day += ONE_DAY
    return count


def add_business_days(day: datetime.date, count: int,
                      holidays: Container[datetime.date] = ()) -> datetime.date:
    """Move ``count`` business days forward (or back when negative), skipping weekends and holidays."""
    step = ONE_DAY if count >= 0 else -ONE_DAY
    remaining = abs(count)
    while remaining > 0:
        day += step
        if is_business_day(day, holidays):
            remaining -= 1
    return day


def next_business_day(day: datetime.date, holidays: Container[datetime.date] = ()) -> datetime.date:
    """``day`` itself when it is a business day, else the next one."""
    while not is_business_day(day, holidays):
        day += ONE_DAY
    return day


def weekday_number(name: str) -> int:
    """0 for Monday ... 6 for Sunday; accepts full names or three-letter abbreviations."""
    key = name.strip().lower()
    for number, full in enumerate(WEEKDAY_NAMES):
        if key == full or key == full[:3]:
            return number
    raise ValueError(f"unknown weekday {name!r}")


def nth_weekday(year: int, month: int, weekday: int, n: int) -> Optional[datetime.date]:
    """The ``n``-th given weekday of a month (``n=-1`` for the last), or None if it does not exist."""
    if n == 0 or not -5 <= n <= 5:
        raise ValueError(f"n must be 1..5 or -1..-5, got {n}")
    days = [datetime.date(year, month, d) for d in range(1, calendar.monthrange(year, month)[1] + 1)
            if datetime.date(year, month, d).weekday() == weekday]
    index = n - 1 if n > 0 else n
    if -len(days) <= index < len(days):
        return days[index]
    return None


def monthly_on_nth_weekday(start: datetime.date, weekday: int, n: int, count: int) -> list[datetime.date]:
    """The next ``count`` dates on or after ``start`` that are the ``n``-th ``weekday`` of their month.

    Months without such a day (a fifth Friday) are skipped.
    """
    if count < 0:
        raise ValueError("count must not be negative")
    results: list[datetime.date] = []
    year, month = start.year, start.month
    while len(results) < count:
        candidate = nth_weekday(year, month, weekday, n)
        if candidate is not None and candidate >= start:
            results.append(candidate)
        month += 1
        if month > 12:
            month = 1
            year += 1
    return results


def every(start: datetime.date, days: int, until: datetime.date) -> list[datetime.date]:
    """``start``, ``start + days``, ... up to and including ``until``."""
    if days <= 0:
        raise ValueError(f"interval must be positive, got {days}")
    dates = []
    day = start
    step = datetime.timedelta(days=days)
    while day <= until:
        dates.append(day)
        day += step
    return dates


def iso_week_label(day: datetime.date) -> str:
    """``2024-W01`` style label of the ISO week containing ``day``."""
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def quarter(day: datetime.date) -> int:
    """Calendar quarter, 1 to 4."""
    return (day.month - 1) // 3 + 1


def age_on(birth: datetime.date, on: datetime.date) -> int:
    """Whole years from ``birth`` to ``on``; someone born on Feb 29 ages on Mar 1 in common years."""
    if on < birth:
        raise ValueError("date is before birth")
    years = on.year - birth.year
    if (on.month, on.day) < (birth.month, birth.day):
        years -= 1
    return years
