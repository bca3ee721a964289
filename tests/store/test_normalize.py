"""Vessel-name normalization (C2.2), IMO check digits and blanks (C1)."""

import pytest

from store.fields import canonical_enum, format_time, is_blank, parse_time
from store.normalize import clean_imo, commodity_text_key, imo_is_valid, lookup_key, vessel_key, vessel_name_key


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Ocean Grace", "OCEAN GRACE"),
        ("  ocean   grace ", "OCEAN GRACE"),
        ("MV Ocean Grace", "OCEAN GRACE"),
        ("M/V Ocean Grace", "OCEAN GRACE"),
        ("m/v ocean grace", "OCEAN GRACE"),
        ("MT Ocean Grace", "OCEAN GRACE"),
        ("M/T OCEAN GRACE", "OCEAN GRACE"),
        ("SS Ocean Grace", "OCEAN GRACE"),
        ("Ocean-Grace.", "OCEANGRACE"),
        ("Ocean Grace II", "OCEAN GRACE II"),
        ("MVOCEAN", "MVOCEAN"),  # no space: not a prefix
        ("SSANGYONG", "SSANGYONG"),
        ("MT. Ocean Grace", "MT OCEAN GRACE"),  # "MT." is not the bare prefix word
    ],
)
def test_c2_2_vessel_name_key(raw, expected):
    assert vessel_name_key(raw) == expected


def test_c2_2_vessel_key_prefers_imo_and_never_mixes_with_names():
    assert vessel_key("9074729", "Ocean Grace") == "IMO9074729"
    assert vessel_key(None, "MV Ocean Grace") == "NAME:OCEAN GRACE"
    assert vessel_key(None, "  ") is None
    # A vessel named like an IMO number stays a name.
    assert vessel_key(None, "9074729") != vessel_key("9074729", None)


@pytest.mark.parametrize("imo", ["9074729", "9321483", "9811000", "1000019"])
def test_imo_check_digit_accepts_valid_numbers(imo):
    assert imo_is_valid(imo)


@pytest.mark.parametrize("imo", ["9074728", "907472", "90747290", "907472a", "", "0000001"])
def test_imo_check_digit_rejects_invalid_numbers(imo):
    assert not imo_is_valid(imo)


def test_clean_imo_strips_the_prefix_and_refuses_bad_numbers():
    assert clean_imo("IMO 9074729") == "9074729"
    assert clean_imo("imo:9074729") == "9074729"
    with pytest.raises(ValueError):
        clean_imo("IMO 9074728")


def test_c2_2_commodity_text_key_and_lookup_key():
    assert commodity_text_key("  Soya-Beans ") == "soyabeans"
    assert commodity_text_key("Iron  Ore, fines") == "iron ore fines"
    assert lookup_key("Óleo  Diesel") == "oleodiesel"
    assert lookup_key("AÇÚCAR!") == lookup_key("acucar")


@pytest.mark.parametrize("value", [None, "", "   ", "N/A", "n/a", " tbc ", "TBN", float("nan")])
def test_c1_blank_values(value):
    assert is_blank(value)


@pytest.mark.parametrize("value", ["0", "NA", "TBA", "n/a/", 0, 0.0])
def test_c1_values_that_are_not_blank(value):
    assert not is_blank(value)


def test_c1_times_are_utc_with_z():
    assert format_time(parse_time("2024-03-01")) == "2024-03-01T00:00:00Z"
    assert format_time(parse_time("2024-03-01T10:15:00")) == "2024-03-01T10:15:00Z"
    assert format_time(parse_time("2024-03-01T10:15:00+02:00")) == "2024-03-01T08:15:00Z"
    assert format_time(parse_time("2024-03-01T10:15:00Z")) == "2024-03-01T10:15:00Z"
    with pytest.raises(ValueError):
        parse_time("01/03/2024")


def test_c1_enumerations_match_case_insensitively_and_keep_the_seed_spelling():
    assert canonical_enum("operation", "LOAD") == "load"
    assert canonical_enum("quantity_unit", "mt") == "MT"
    assert canonical_enum("quantity_unit", "units") == "Units"
    assert canonical_enum("vessel_status", "bErThEd") == "berthed"
    assert canonical_enum("operation", "discharge") is None
    assert canonical_enum("vessel_type", "bulk  carrier") == "Bulk Carrier"
    assert canonical_enum("vessel_type", "Ro-Ro") == "Ro-Ro"  # open enumeration
