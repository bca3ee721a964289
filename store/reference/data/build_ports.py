"""Build `ports.csv`, the UN/LOCODE port directory shipped in `store/reference/data/`.

Run from anywhere with the project's virtualenv:

    .venv/bin/python store/reference/data/build_ports.py [SOURCE_DIR]

SOURCE_DIR holds `sea-ports.json` and `unlocode-country-codes.csv` and defaults to
`store/reference/data/sources/`, where both ship with the repository (their licences are in
`store/reference/data/LICENSES/`). The output is rewritten in place and
is byte-for-byte reproducible for the same inputs and tz database (the `tzdata`
package in the virtualenv).

The sea-ports coordinates are dirty: some pairs are swapped, some point at the wrong
place, and so are some timezones. The rules, also told in README.md:

* A timezone is kept only when the tz database (zone.tab) lists it, or the zone it was
  renamed to, for the port's country; otherwise it is left empty.
* A coordinate pair is trusted when it lies within `NEAR_KM` of its country's tz
  reference points (zone.tab) or of another trusted port of the same country, and
  inside the bounds of the port's (kept) timezone region.
* A pair that is not trusted but whose swap is, is repaired by swapping it.
* Everything else, and the pairs in `DISTRUSTED`, is left empty: no coordinates is
  better than wrong ones.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE / "sources"
OUTPUT = HERE / "ports.csv"
COLUMNS = (
    "unlocode", "name", "country_code", "country_name", "latitude", "longitude", "timezone"
)

#: Country names of the UN/LOCODE list that carry a qualifier ("(the)", an inverted
#: "Name, Republic of", a parenthesised official form) rewritten to the short name a
#: user would type. Names without a qualifier are kept as they are.
COUNTRY_REWRITES: dict[str, str] = {
    "United Arab Emirates (the)": "United Arab Emirates",
    "Bolivia, Plurinational State of": "Bolivia",
    "Congo, The Democratic Republic of the": "Democratic Republic of the Congo",
    "Falkland Islands (Malvinas)": "Falkland Islands",
    "Micronesia, Federated States of": "Micronesia",
    "Iran, Islamic Republic of": "Iran",
    "Korea, Democratic People's Republic of": "North Korea",
    "Korea, Republic of": "South Korea",
    "Moldova, Republic of": "Moldova",
    "Saint Martin (French Part)": "Saint Martin",
    "Marshall Islands (the)": "Marshall Islands",
    "Northern Mariana Islands (the)": "Northern Mariana Islands",
    "Philippines (the)": "Philippines",
    "Palestine, State of": "Palestine",
    "Russian Federation (the)": "Russia",
    "Sudan (the)": "Sudan",
    "Sint Maarten (Dutch Part)": "Sint Maarten",
    "Syrian Arab Republic (the)": "Syria",
    "Turks and Caicos Islands (the)": "Turks and Caicos Islands",
    "Taiwan (Province of China)": "Taiwan",
    "Tanzania, United Republic of": "Tanzania",
    "United States of America (the)": "United States",
    "Holy See (Vatican City State)": "Vatican City",
    "Venezuela (Bolivarian Republic of)": "Venezuela",
    "Virgin Islands (British)": "British Virgin Islands",
    "Virgin Islands (U.S.)": "U.S. Virgin Islands",
}

#: ISO codes withdrawn from ISO 3166 that LOCODEs in the source still use: their name,
#: and the codes whose tz zones now cover them.
FORMER_COUNTRIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "AN": ("Netherlands Antilles", ("CW", "SX", "BQ")),
}

#: Pairs found wrong on review that no rule catches (geocoded to the wrong place).
DISTRUSTED: dict[str, str] = {
    "ANSXM": "St Maarten placed on Curacao (12.2N 68.8W)",
    "CNSWA": "Jieyang airport placed at Guangzhou, the province centre",
    "CNZHA": "Zhanjiang airport placed at Guangzhou, the province centre",
    "FRHON": "Honfleur (Normandy) placed in the Ain department",
    "FRJAV": "Javrezac (Charente) placed in the Ain department",
    "TRAMB": "Ambarli (Istanbul) placed in Artvin province, 1,000 km east",
}

#: How far a trusted port may lie from the nearest other trusted point of its country.
NEAR_KM = 1500.0

#: Plausible (lat_min, lat_max, lon_min, lon_max) of each tz region; Pacific is split
#: by the antimeridian, so its boxes are listed separately.
REGION_BOUNDS: dict[str, tuple[tuple[float, float, float, float], ...]] = {
    "Africa": ((-36, 38, -26, 60),),
    "America": ((-60, 84, -180, -25),),
    "Antarctica": ((-90, -60, -180, 180),),
    "Asia": ((-15, 82, 25, 180), (60, 72, -180, -168)),
    "Atlantic": ((-60, 72, -70, 20),),
    "Australia": ((-45, -9, 110, 160),),
    "Europe": ((27, 82, -32, 70),),
    "Indian": ((-55, 10, 30, 110),),
    "Pacific": ((-60, 60, 100, 180), (-60, 60, -180, -80)),
}

Point = tuple[float, float]  # (latitude, longitude)


@dataclass
class SourcePort:
    """A sea-ports entry on its way through the build."""

    unlocode: str
    name: str
    pair: Point | None  # as given, already turned from [lon, lat] into (lat, lon)
    timezone: str  # "" when unknown or distrusted
    point: Point | None = None
    outcome: str = "missing"  # kept | repaired | dropped | missing


def country_names(path: Path) -> dict[str, str]:
    """ISO code -> cleaned country name, from the UN/LOCODE country codes file."""
    with path.open(encoding="utf-8", newline="") as f:
        names = {row["CountryCode"]: row["CountryName"].strip() for row in csv.DictReader(f)}
    names = {code: COUNTRY_REWRITES.get(name, name) for code, name in names.items()}
    names.update({code: name for code, (name, _) in FORMER_COUNTRIES.items()})
    return names


def tz_zones() -> tuple[dict[str, dict[str, Point]], dict[str, str]]:
    """Per country code, its tz zones and their reference points (zone.tab); and the
    tz database's links (old name -> current name)."""
    zoneinfo = resources.files("tzdata.zoneinfo")
    zones: dict[str, dict[str, Point]] = {}
    for line in (zoneinfo / "zone.tab").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            code, coordinates, zone = line.split("\t")[:3]
            zones.setdefault(code, {})[zone] = parse_iso6709(coordinates)
    for code, (_, successors) in FORMER_COUNTRIES.items():
        zones[code] = {z: p for s in successors for z, p in zones.get(s, {}).items()}
    links = {}
    for line in (zoneinfo / "tzdata.zi").read_text(encoding="utf-8").splitlines():
        if line.startswith("L "):
            _, target, link = line.split()
            links[link] = target
    return zones, links


def parse_iso6709(text: str) -> Point:
    """zone.tab's `+DDMM+DDDMM` or `+DDMMSS+DDDMMSS` as decimal (lat, lon)."""
    split = max(text.rfind("+"), text.rfind("-"))
    return _dms(text[:split], 2), _dms(text[split:], 3)


def _dms(text: str, degree_digits: int) -> float:
    sign = -1 if text[0] == "-" else 1
    digits = text[1:]
    parts = [digits[:degree_digits]] + [
        digits[i : i + 2] for i in range(degree_digits, len(digits), 2)
    ]
    return sign * sum(int(p) / 60**i for i, p in enumerate(parts))


def names_country_zone(tz: str, country_zones: dict[str, Point], links: dict[str, str]) -> bool:
    """Whether `tz` is one of the country's zones or a name the tz database links to the
    same zone ("Asia/Calcutta" for "Asia/Kolkata", "Africa/Asmera" for "Africa/Asmara")."""
    current = links.get(tz, tz)
    return any(current == links.get(zone, zone) for zone in country_zones)


def read_ports(source: Path, zones: dict, links: dict[str, str]) -> list[SourcePort]:
    """The sea-ports entries, with pairs as (lat, lon) and distrusted timezones blank."""
    with (source / "sea-ports.json").open(encoding="utf-8") as f:
        raw = json.load(f)
    ports = []
    for unlocode, entry in sorted(raw.items()):
        coordinates = entry.get("coordinates")
        pair = (float(coordinates[1]), float(coordinates[0])) if coordinates else None
        tz = entry.get("timezone") or ""
        if not names_country_zone(tz, zones.get(unlocode[:2], {}), links):
            tz = ""
        ports.append(SourcePort(unlocode, entry["name"].strip(), pair, tz))
    return ports


def resolve(ports: list[SourcePort], zones: dict) -> None:
    """Resolve every country's coordinates, anchored on its tz reference points."""
    by_country: dict[str, list[SourcePort]] = {}
    for port in ports:
        by_country.setdefault(port.unlocode[:2], []).append(port)
    for code, members in by_country.items():
        resolve_country(members, list(zones.get(code, {}).values()))


def resolve_country(ports: list[SourcePort], anchors: list[Point]) -> None:
    """Set `point` and `outcome` of one country's ports (see the module docstring).

    Given pairs are grown out from the anchors first; swaps are considered only for
    what is left, so a swap never beats a given pair that has support."""
    trusted = list(anchors)

    def accepts(point: Point, port: SourcePort) -> bool:
        return fits_region(point, port.timezone) and any(
            distance_km(point, t) <= NEAR_KM for t in trusted
        )

    for outcome in ("kept", "repaired"):
        grown = True
        while grown:
            grown = False
            for port in ports:
                if port.point or not port.pair or port.unlocode in DISTRUSTED:
                    continue
                lat, lon = port.pair
                candidate = (lat, lon) if outcome == "kept" else (lon, lat)
                if accepts(candidate, port):
                    port.point, port.outcome, grown = candidate, outcome, True
                    trusted.append(candidate)
    for port in ports:
        if port.pair and not port.point:
            port.outcome = "dropped"


def fits_region(point: Point, timezone: str) -> bool:
    """Whether `point` is possible on Earth and, when a timezone is known, inside its
    region's bounds."""
    lat, lon = point
    if not (-90 <= lat <= 90 and -180 <= lon <= 180) or point == (0.0, 0.0):
        return False
    if not timezone:
        return True
    boxes = REGION_BOUNDS.get(timezone.split("/")[0], ())
    return any(a <= lat <= b and c <= lon <= d for a, b, c, d in boxes)


def distance_km(a: Point, b: Point) -> float:
    """Great-circle distance."""
    lat1, lon1, lat2, lon2 = map(math.radians, (*a, *b))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin(
        (lon2 - lon1) / 2
    ) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(min(1.0, h)))


def write_csv(ports: list[SourcePort], names: dict[str, str], path: Path) -> None:
    """Write the directory, one row per port, sorted by LOCODE."""
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(COLUMNS)
        for p in ports:
            lat, lon = (round(p.point[0], 5), round(p.point[1], 5)) if p.point else ("", "")
            code = p.unlocode[:2]
            writer.writerow((p.unlocode, p.name, code, names[code], lat, lon, p.timezone))


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_SOURCE
    names = country_names(source / "unlocode-country-codes.csv")
    zones, links = tz_zones()
    ports = read_ports(source, zones, links)
    resolve(ports, zones)
    write_csv(ports, names, OUTPUT)
    outcomes = ("kept", "repaired", "dropped", "missing")
    counts = {o: sum(p.outcome == o for p in ports) for o in outcomes}
    print(f"wrote {len(ports)} ports to {OUTPUT}: {counts}")
    for p in ports:
        if p.outcome in ("repaired", "dropped"):
            reason = DISTRUSTED.get(p.unlocode, "")
            print(f"  {p.outcome:8} {p.unlocode} {p.name}: given (lat, lon) {p.pair} {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
