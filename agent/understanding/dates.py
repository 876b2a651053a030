"""Dates and relative dates, resolved against a given reference time (never the clock).

"today", "tomorrow", "the day after tomorrow", "yesterday", "friday" (the next one after
today), "next friday", "last friday", "in 3 days", "two weeks ago", "3 months ago",
"last month", "on the fifth" (this month if not yet past, else next month), "the 22nd of
april", "march the 5th 2023", "end of the month", "start of next month".
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, timedelta

from agent.understanding.numbers import parse_cardinal, parse_ordinal
from agent.understanding.tokens import Token

WEEKDAYS = {
    "monday": 0,
    "mon": 0,
    "tuesday": 1,
    "tue": 1,
    "tues": 1,
    "wednesday": 2,
    "wed": 2,
    "thursday": 3,
    "thu": 3,
    "thurs": 3,
    "friday": 4,
    "fri": 4,
    "saturday": 5,
    "sat": 5,
    "sunday": 6,
    "sun": 6,
}
MONTHS = {
    "january": 1,
    "jan": 1,
    "february": 2,
    "feb": 2,
    "march": 3,
    "mar": 3,
    "april": 4,
    "apr": 4,
    "may": 5,
    "june": 6,
    "jun": 6,
    "july": 7,
    "jul": 7,
    "august": 8,
    "aug": 8,
    "september": 9,
    "sep": 9,
    "sept": 9,
    "october": 10,
    "oct": 10,
    "november": 11,
    "nov": 11,
    "december": 12,
    "dec": 12,
}
UNIT_DAYS = {"day": 1, "days": 1, "week": 7, "weeks": 7}
UNIT_MONTHS = {"month": 1, "months": 1, "year": 12, "years": 12}


@dataclass(frozen=True, slots=True)
class DateMatch:
    value: date
    tok_start: int
    tok_end: int
    rule: str


def _add_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def _month_end(d: date) -> date:
    return date(d.year, d.month, calendar.monthrange(d.year, d.month)[1])


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _words(toks: list[Token], i: int, *words: str) -> bool:
    if i + len(words) > len(toks):
        return False
    return all(toks[i + k].text == w for k, w in enumerate(words))


def _quantity(toks: list[Token], i: int) -> tuple[int, int] | None:
    if i < len(toks) and toks[i].text in ("a", "an", "one"):
        return 1, i + 1
    m = parse_cardinal(toks, i)
    if m is None or m.value != int(m.value) or not 0 < m.value < 1000:
        return None
    return int(m.value), m.end


def _day_month_year(toks: list[Token], i: int, today: date) -> DateMatch | None:
    """ "the 5th", "5th of march", "march the 5th", "march 5 2023", "5 march"."""
    j = i
    if j < len(toks) and toks[j].text == "the":
        j += 1
    month = None
    day = None
    if j < len(toks) and toks[j].text in MONTHS:
        month = MONTHS[toks[j].text]
        k = j + 1
        if k < len(toks) and toks[k].text == "the":
            k += 1
        od = parse_ordinal(toks, k)
        if od is None and k < len(toks) and toks[k].kind == "num" and toks[k].text.isdigit():
            od = (int(toks[k].text), k + 1)
        if od is None:
            return None
        day, end = od
        rule = "date:month_day"
    else:
        od = parse_ordinal(toks, j)
        if od is None:
            if j < len(toks) and toks[j].kind == "num" and toks[j].text.isdigit():
                if j + 1 < len(toks) and toks[j + 1].text in MONTHS:
                    od = (int(toks[j].text), j + 1)
            if od is None:
                return None
        day, end = od
        k = end
        if k < len(toks) and toks[k].text == "of" and k + 1 < len(toks):
            if toks[k + 1].text in MONTHS:
                k += 1
            elif _words(toks, k + 1, "next", "month") or _words(toks, k + 1, "this", "month"):
                nxt = toks[k + 1].text == "next"
                base = _add_months(today.replace(day=1), 1 if nxt else 0)
                d = _safe_date(base.year, base.month, day)
                return DateMatch(d, i, k + 3, "date:day_of_relative_month") if d else None
        if k < len(toks) and toks[k].text in MONTHS:
            month = MONTHS[toks[k].text]
            end = k + 1
            rule = "date:day_month"
        elif j == i and toks[i].kind != "ord" and toks[i].text not in ("first",):
            return None  # a bare ordinal word ("second") needs "the" or a month
        else:
            rule = "date:day_of_month"
    if not 1 <= day <= 31:
        return None
    year = today.year
    if end < len(toks) and toks[end].kind == "num" and len(toks[end].text) == 4:
        year = int(toks[end].text)
        end += 1
        rule += "_year"
    elif month is None:
        month = today.month
        if day < today.day:
            nxt = _add_months(today.replace(day=1), 1)
            year, month = nxt.year, nxt.month
    elif month < today.month:
        year += 1
    d = _safe_date(year, month, day)
    if d is None:
        return None
    return DateMatch(d, i, end, rule)


def find_date(toks: list[Token], today: date) -> DateMatch | None:
    """The first date expression in the tokens, resolved against today."""
    n = len(toks)
    for i in range(n):
        w = toks[i].text
        if toks[i].kind != "word" and toks[i].kind != "ord" and toks[i].kind != "num":
            continue
        if w in ("today", "tonight"):
            return DateMatch(today, i, i + 1, "date:today")
        if w == "tomorrow":
            return DateMatch(today + timedelta(days=1), i, i + 1, "date:tomorrow")
        if _words(toks, i, "day", "after", "tomorrow"):
            return DateMatch(today + timedelta(days=2), i, i + 3, "date:day_after_tomorrow")
        if _words(toks, i, "day", "before", "yesterday"):
            return DateMatch(today - timedelta(days=2), i, i + 3, "date:day_before_yesterday")
        if w == "yesterday" or _words(toks, i, "last", "night"):
            end = i + (1 if w == "yesterday" else 2)
            return DateMatch(today - timedelta(days=1), i, end, "date:yesterday")
        if _words(toks, i, "end", "of", "the", "month") or _words(toks, i, "end", "of", "month"):
            end = i + (4 if toks[i + 2].text == "the" else 3)
            return DateMatch(_month_end(today), i, end, "date:end_of_month")
        if _words(toks, i, "end", "of", "next", "month"):
            return DateMatch(
                _month_end(_add_months(today.replace(day=1), 1)), i, i + 4, "date:end_of_next_month"
            )
        if w in ("start", "beginning") and _words(toks, i + 1, "of", "next", "month"):
            return DateMatch(
                _add_months(today.replace(day=1), 1), i, i + 4, "date:start_of_next_month"
            )
        if _words(toks, i, "last", "month"):
            return DateMatch(_add_months(today.replace(day=1), -1), i, i + 2, "date:last_month")
        if _words(toks, i, "next", "month"):
            return DateMatch(_add_months(today.replace(day=1), 1), i, i + 2, "date:next_month")
        if w in ("next", "last", "this", "on", "coming") and i + 1 < n:
            nxt = toks[i + 1].text
            if nxt in WEEKDAYS:
                wd = WEEKDAYS[nxt]
                if w == "last":
                    delta = (today.weekday() - wd) % 7 or 7
                    return DateMatch(today - timedelta(days=delta), i, i + 2, "date:last_weekday")
                delta = (wd - today.weekday()) % 7 or 7
                if w == "next" and delta <= 1:
                    delta += 7  # "next friday" said on a thursday means a week on
                return DateMatch(today + timedelta(days=delta), i, i + 2, "date:next_weekday")
        if w in WEEKDAYS and toks[i].kind == "word" and w not in ("sat", "sun", "wed", "mar"):
            delta = (WEEKDAYS[w] - today.weekday()) % 7 or 7
            end = i + 1
            if _words(toks, i + 1, "in", "a", "week"):
                delta += 7
                end += 3
            return DateMatch(today + timedelta(days=delta), i, end, "date:weekday")
        if w == "in":
            q = _quantity(toks, i + 1)
            if q is not None and q[1] < n:
                unit = toks[q[1]].text
                if unit in UNIT_DAYS:
                    d = today + timedelta(days=q[0] * UNIT_DAYS[unit])
                    return DateMatch(d, i, q[1] + 1, "date:in_n_days")
                if unit in UNIT_MONTHS:
                    d = _add_months(today, q[0] * UNIT_MONTHS[unit])
                    return DateMatch(d, i, q[1] + 1, "date:in_n_months")
        q = _quantity(toks, i)
        if q is not None and q[1] + 1 < n and toks[q[1] + 1].text == "ago":
            unit = toks[q[1]].text
            if unit in UNIT_DAYS:
                d = today - timedelta(days=q[0] * UNIT_DAYS[unit])
                return DateMatch(d, i, q[1] + 2, "date:n_days_ago")
            if unit in UNIT_MONTHS:
                return DateMatch(
                    _add_months(today, -q[0] * UNIT_MONTHS[unit]), i, q[1] + 2, "date:n_months_ago"
                )
        if w in ("the", *MONTHS) or toks[i].kind in ("ord", "num") or w in ("first",):
            if w == "may" and not (
                i + 1 < n and (toks[i + 1].kind in ("ord", "num") or toks[i + 1].text == "the")
            ):
                continue  # the verb "may"
            m = _day_month_year(toks, i, today)
            if m is not None:
                return m
    return None
