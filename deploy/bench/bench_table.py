"""What the benchmark tables share: a cell is the median of the runs with their range."""

from __future__ import annotations

import statistics


def cell(vals: list[float] | None, fmt: str) -> str:
    """`median (min-max)` of vals in fmt; "-" when there is nothing."""
    if not vals:
        return "-"
    return f"{statistics.median(vals):{fmt}} ({min(vals):{fmt}}-{max(vals):{fmt}})"
