"""The UN/LOCODE port directory: its shipped data and its lookups."""

from __future__ import annotations

import subprocess
import sys
import zoneinfo
from pathlib import Path

import pytest

from store.reference.ports import Port, PortDirectory, default_directory, looks_like_unlocode

# Where the timezone region says a port must be: (lat_min, lat_max, lon_min, lon_max).
# Pacific straddles the antimeridian, so it is tested apart.
REGION_BOUNDS = {
    "America": (-60, 84, -180, -25),
    "Europe": (27, 82, -32, 70),
    "Asia": (-15, 82, 25, 180),
    "Australia": (-45, -9, 110, 160),
    "Africa": (-36, 38, -26, 60),
    "Atlantic": (-60, 72, -70, 20),
    "Indian": (-55, 10, 30, 110),
}


@pytest.fixture(scope="module")
def directory() -> PortDirectory:
    return default_directory()


@pytest.fixture(scope="module")
def located_ports(directory) -> list[Port]:
    return [p for p in directory.all() if p.latitude is not None]


def test_directory_holds_every_source_port(directory):
    assert len(directory) == 1634
    assert all(looks_like_unlocode(p.unlocode) for p in directory.all())
    assert all(p.country_code == p.unlocode[:2] for p in directory.all())


def test_country_names_carry_no_qualifier(directory):
    names = directory.countries()
    assert names == sorted(set(names))
    assert not [n for n in names if "(the)" in n or ", Republic of" in n or n != n.strip()]
    assert {"United States", "United Arab Emirates", "Russia", "South Korea"} <= set(names)


@pytest.mark.parametrize(
    "code, name, country, lat, lon",
    [
        ("NLRTM", "Rotterdam", "Netherlands", 51.9, 4.3),
        ("BRSSZ", "Santos", "Brazil", -23.95, -46.3),
        ("SGSIN", "Singapore", "Singapore", 1.27, 103.8),
        ("AUNTL", "Newcastle", "Australia", -32.9, 151.8),
        ("USHOU", "Houston", "United States", 29.75, -95.3),
        ("CNSHA", "Shanghai", "China", 31.2, 121.5),
    ],
)
def test_known_ports(directory, code, name, country, lat, lon):
    port = directory.get(code)
    assert (port.name, port.country_name) == (name, country)
    assert port.latitude == pytest.approx(lat, abs=0.5)
    assert port.longitude == pytest.approx(lon, abs=0.5)


def test_coordinates_lie_in_their_timezone_region(located_ports):
    def fits(port: Port) -> bool:
        region = port.timezone.split("/")[0]
        lat, lon = port.latitude, port.longitude
        if region == "Pacific":
            return -60 <= lat <= 60 and abs(lon) >= 80
        lat_min, lat_max, lon_min, lon_max = REGION_BOUNDS[region]
        return lat_min <= lat <= lat_max and lon_min <= lon <= lon_max

    misplaced = [p.unlocode for p in located_ports if p.timezone and not fits(p)]
    assert misplaced == []


def test_coordinates_are_pairs_on_earth(located_ports, directory):
    assert len(located_ports) > 1550
    assert all(p.longitude is not None for p in located_ports)
    assert all(-90 <= p.latitude <= 90 and -180 <= p.longitude <= 180 for p in located_ports)
    unlocated = [p for p in directory.all() if p.latitude is None]
    assert all(p.longitude is None for p in unlocated)


def test_timezones_are_real_zones(directory):
    for port in directory.all():
        if port.timezone:
            zoneinfo.ZoneInfo(port.timezone)


@pytest.mark.parametrize(
    "code, lat, lon, wrong_timezone",
    [
        # The source gave these as [lat, lon]; their timezones came from the bad pair.
        ("DZAAE", 36.9, 7.75, "Africa/Addis_Ababa"),
        ("VEGUB", 11.67, -70.2, "Antarctica/South_Pole"),
        ("CDBOA", -5.85, 13.05, "Africa/Bamako"),
    ],
)
def test_swapped_source_pairs_are_repaired(directory, code, lat, lon, wrong_timezone):
    port = directory.get(code)
    assert port.latitude == pytest.approx(lat, abs=0.5)
    assert port.longitude == pytest.approx(lon, abs=0.5)
    assert port.timezone != wrong_timezone


@pytest.mark.parametrize(
    "code",
    [
        "CLCAP",  # a Chilean port the source placed in Spain
        "BMSOU",  # a Bermudan port the source placed at Southampton, England
        "TNJAR",  # Zarzis with its longitude's sign flipped, off West Africa
    ],
)
def test_coordinates_that_cannot_be_trusted_are_left_out(directory, code):
    port = directory.get(code)
    assert (port.latitude, port.longitude) == (None, None)


def test_lookups_ignore_case(directory):
    assert directory.get("nlrtm") == directory.get("NLRTM") == directory.get("NlRtM")
    assert "brssz" in directory and "BRSSZ" in directory
    assert directory.get("XXXXX") is None and "XXXXX" not in directory
    assert directory.get(None) is None and None not in directory


def test_directory_from_csv_reads_blank_values_as_none():
    text = (
        "unlocode,name,country_code,country_name,latitude,longitude,timezone\n"
        "ZZAAA,Nowhere,ZZ,Zedland,,,\n"
        "ZZBBB,Somewhere,ZZ,Zedland,1.5,-2.25,Etc/UTC\n"
    )
    directory = PortDirectory.from_csv(text)
    assert directory.get("zzaaa") == Port("ZZAAA", "Nowhere", "ZZ", "Zedland", None, None, None)
    assert (directory.get("ZZBBB").latitude, directory.get("ZZBBB").longitude) == (1.5, -2.25)
    assert [p.unlocode for p in directory.all()] == ["ZZAAA", "ZZBBB"]
    assert directory.countries() == ["Zedland"]


@pytest.mark.parametrize("text", ["NLRTM", "brssz", "US2AB", "gb9zz"])
def test_looks_like_unlocode_accepts(text):
    assert looks_like_unlocode(text)


@pytest.mark.parametrize(
    "text", ["NLRT", "12345", "NL-RT", "NLRTMX", "US0AB", "US1AB", " NLRTM", "NLRTM\n", "", None]
)
def test_looks_like_unlocode_rejects(text):
    assert not looks_like_unlocode(text)


def test_nothing_is_read_at_import_time():
    probe = "import store.reference.ports as p; print(p.default_directory.cache_info().currsize)"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "0"
