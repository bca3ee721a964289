"""The UN/LOCODE port directory shipped with the product (`store/reference/data/ports.csv`).

Ingest fills the port and country names a feed file leaves out from here, feeds are
checked against it, and `looks_like_unlocode` is the shape test of contract C5. The
data file is built by `store/reference/data/build_ports.py`; its README tells the sources and
the cleaning. Nothing is read at import time: `default_directory()` loads the file on
first use and keeps it.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass
from importlib import resources
from typing import Iterable

#: Two letters of the ISO country, three of the place: letters or digits 2-9 (UN/LOCODE
#: leaves out 0 and 1, which read like O and I).
_UNLOCODE = re.compile(r"[A-Za-z]{2}[A-Za-z2-9]{3}")


def looks_like_unlocode(text: object) -> bool:
    """Whether `text` has the shape of a UN/LOCODE ("NLRTM", "brssz", "US2AB"),
    whatever the case. Says nothing about whether the code exists."""
    return isinstance(text, str) and _UNLOCODE.fullmatch(text) is not None


@dataclass(frozen=True)
class Port:
    """One port of the directory; latitude, longitude and timezone are None when unknown."""

    unlocode: str
    name: str
    country_code: str
    country_name: str
    latitude: float | None
    longitude: float | None
    timezone: str | None


class PortDirectory:
    """Ports by UN/LOCODE; lookups ignore case."""

    def __init__(self, ports: Iterable[Port]):
        self._ports = {port.unlocode.upper(): port for port in ports}

    @classmethod
    def from_csv(cls, text: str) -> "PortDirectory":
        """A directory from the text of a `ports.csv` file."""
        return cls(_port(row) for row in csv.DictReader(io.StringIO(text)))

    def get(self, unlocode: str) -> Port | None:
        """The port of `unlocode`, or None when the directory does not know it."""
        if not isinstance(unlocode, str):
            return None
        return self._ports.get(unlocode.upper())

    def __contains__(self, unlocode: object) -> bool:
        return isinstance(unlocode, str) and unlocode.upper() in self._ports

    def __len__(self) -> int:
        return len(self._ports)

    def all(self) -> list[Port]:
        """Every port, in UN/LOCODE order."""
        return sorted(self._ports.values(), key=lambda port: port.unlocode)

    def countries(self) -> list[str]:
        """The distinct country names, sorted."""
        return sorted({port.country_name for port in self._ports.values()})


@functools.lru_cache(maxsize=1)
def default_directory() -> PortDirectory:
    """The directory shipped in `store/reference/data/ports.csv`, read once and cached."""
    text = resources.files("store.reference").joinpath("data", "ports.csv").read_text(encoding="utf-8")
    return PortDirectory.from_csv(text)


def _port(row: dict[str, str]) -> Port:
    return Port(
        unlocode=row["unlocode"],
        name=row["name"],
        country_code=row["country_code"],
        country_name=row["country_name"],
        latitude=_number(row["latitude"]),
        longitude=_number(row["longitude"]),
        timezone=row["timezone"] or None,
    )


def _number(text: str) -> float | None:
    return float(text) if text else None
