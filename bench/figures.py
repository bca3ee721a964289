"""The figures a benchmark run reports: repeated measurements, a target, a reference.

Every figure is the median of several runs, with min and max (this machine is shared
and noisy). A service timing carries the same run's reference (a ceiling or a
baseline) and their ratio, so that a slow run of the whole machine shows as such.
"""

from __future__ import annotations

import dataclasses
import operator
import statistics
from typing import Callable

_COMPARE: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le}


@dataclasses.dataclass(frozen=True)
class Target:
    """A bound the median must meet: `op` is ">=" or "<="; `text` says it in words
    when the bound is relative to another figure of the run."""

    op: str
    value: float
    text: str = ""

    def met(self, median: float) -> bool:
        return _COMPARE[self.op](median, self.value)


@dataclasses.dataclass
class Figure:
    """One reported figure of a run."""

    id: str
    section: str
    label: str
    unit: str
    values: list[float]
    target: Target | None = None
    #: The same run's reference: its label and median, in the same unit.
    reference: tuple[str, float] | None = None
    note: str = ""
    #: Why there is no value (a service that did not answer, an endpoint missing).
    missing: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def ratio(self) -> float | None:
        """The median over the reference's median."""
        if not self.values or self.reference is None or not self.reference[1]:
            return None
        return self.median / self.reference[1]

    @property
    def met(self) -> bool | None:
        """True or False against the target; None without a target or a value."""
        if self.target is None or not self.values:
            return None
        return self.target.met(self.median)

    def as_dict(self) -> dict:
        """The figure as JSON-able data (the run's raw record)."""
        data = dataclasses.asdict(self)
        data.update(median=self.median if self.values else None, ratio=self.ratio, met=self.met)
        return data


def missing(id: str, section: str, label: str, unit: str, why: str, target: Target | None = None) -> Figure:
    """A figure that could not be measured in this run, and why."""
    return Figure(id, section, label, unit, [], target, missing=why)
