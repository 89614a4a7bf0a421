"""CronJob schedules: the five-field cron syntax Kubernetes accepts (robfig/cron's standard parser), and the
next time a schedule fires.

Fields: minute, hour, day of month, month, day of week; each `*`, `?`, a number or name (`jan`, `mon`), a
range `a-b`, a step `*/n` / `a-b/n` / `a/n`, or a list of those. Macros: `@yearly`, `@annually`,
`@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`. As in cron, when both day fields are
restricted a day matching either fires; when either is `*`, both must match.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, lowest, highest, names); day of week 7 is Sunday as well.
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
# Schedules that never fire (Feb 30) are searched this far ahead, as robfig/cron does.
_SEARCH_YEARS = 5


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month or day of week is `*`: both must match

    def _day_matches(self, moment: datetime) -> bool:
        dom = moment.day in self.days
        dow = (moment.isoweekday() % 7) in self.weekdays
        return (dom and dow) if self.any_day else (dom or dow)

    def next_after(self, moment: datetime, zone: tzinfo | None = None) -> datetime | None:
        """The first firing strictly after `moment` (aware), in wall-clock time of `zone` (default: the
        moment's own); None if the schedule never fires."""
        local = moment.astimezone(zone) if zone is not None else moment
        wall = local.replace(tzinfo=None, second=0, microsecond=0) + timedelta(minutes=1)
        limit = wall + timedelta(days=366 * _SEARCH_YEARS)
        while wall < limit:
            if wall.month not in self.months:
                wall = (wall.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self._day_matches(wall):
                wall = wall.replace(hour=0, minute=0) + timedelta(days=1)
            elif wall.hour not in self.hours:
                wall = wall.replace(minute=0) + timedelta(hours=1)
            elif wall.minute not in self.minutes:
                wall += timedelta(minutes=1)
            else:
                return wall.replace(tzinfo=local.tzinfo)
        return None


def parse_schedule(text: str) -> Schedule:
    """A schedule from its cron text; CronError (one line) when it is not one."""
    spec = _MACROS.get(text.strip().lower(), text)
    fields = spec.split()
    if len(fields) != len(_FIELDS):
        raise CronError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}: {text!r}"
        )
    values = [_parse_field(raw, *meta) for raw, meta in zip(fields, _FIELDS, strict=True)]
    weekdays = frozenset(day % 7 for day in values[4])
    any_day = _is_star(fields[2]) or _is_star(fields[4])
    return Schedule(values[0], values[1], values[2], values[3], weekdays, any_day)


def _is_star(field: str) -> bool:
    return field in ("*", "?")


def _parse_field(raw: str, name: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    found: set[int] = set()
    for part in raw.split(","):
        span, _, step_text = part.partition("/")
        step = _number(step_text, name, names=()) if step_text else 1
        if step < 1:
            raise CronError(f"{name}: step must be at least 1 in {part!r}")
        if _is_star(span):
            start, end = low, high
        elif "-" in span:
            first, _, last = span.partition("-")
            start, end = _number(first, name, names), _number(last, name, names)
        else:
            start = _number(span, name, names)
            end = high if step_text else start
        if start < low or end > high or start > end:
            raise CronError(f"{name}: {part!r} is outside {low}-{high}")
        found.update(range(start, end + 1, step))
    return frozenset(found)


def _number(text: str, name: str, names: tuple[str, ...]) -> int:
    lowered = text.lower()
    if lowered in names:
        # Month names count from 1, day names from 0 (Sunday).
        return names.index(lowered) + (1 if names is _MONTHS else 0)
    if not text.isdigit():
        raise CronError(f"{name}: {text!r} is not a number")
    return int(text)
