"""The commodity taxonomy and its resolver (contract C6)."""

from __future__ import annotations

import csv
import re
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.errors import ValidationError
from store.normalize import lookup_key
from store.reference.taxonomy import Taxonomy, TaxonomyError, default_taxonomy

SANTOS_LINEUP = Path(__file__).resolve().parents[2] / "docs" / "examples" / "santos-lineup-2023-12.csv"

#: Every goods value of the real Santos lineup of December 2023, and its leaf.
SANTOS_GOODS = {
    "CONTEINERES CHEIOS": "containers/container-cargo/full-containers",
    "CONTEINERES CHEIOSCONTEINERES CHEIOS": "containers/container-cargo/full-containers",
    "CONTEINERES VAZIOS": "containers/container-cargo/empty-containers",
    "ACUCAR A GRANEL": "dry-bulk/sugar/raw-sugar",
    "ACUCAR": "dry-bulk/sugar/sugar-unspecified",
    "FERTILIZANTES": "dry-bulk/fertilizers/fertilizers-unspecified",
    "OLEO DIESEL": "liquid-bulk/refined-products/diesel-gasoil",
    "MILHO A GRANEL": "dry-bulk/grains/corn",
    "GRAN.LIQUIDO NAO ESPECIF": "liquid-bulk/other-liquid-bulk/liquid-bulk-unspecified",
    "CARGA GERAL": "general-cargo/breakbulk/general-cargo-unspecified",
    "PAPEL E CELULOSE": "general-cargo/breakbulk/paper-pulp",
    "OLEO COMBUSTIVEL": "liquid-bulk/refined-products/fuel-oil",
    "VEICULOS/VRS/CCS.RO-RO": "vehicles/ro-ro/vehicles-unspecified",
    "PELLETS A GRANEL": "dry-bulk/animal-feed/soybean-meal",
    "GRAN.SOLIDO NAO ESPECIF": "dry-bulk/other-dry-bulk/dry-bulk-unspecified",
    "SUCOS CITRICOS A GRANEL": "liquid-bulk/fruit-juices/citrus-juices",
    "GASOLINA COMUM": "liquid-bulk/refined-products/gasoline",
    "TRIGO A GRANEL": "dry-bulk/grains/wheat",
    "SOJA A GRANEL": "dry-bulk/grains/soybeans",
    "CONSUMO DE BORDO": "bunkers-ship-supplies/ship-supplies/ship-stores",
    "BANKER": "bunkers-ship-supplies/bunkers/bunker-fuel",
    "SODA CAUSTICA": "liquid-bulk/chemicals/caustic-soda",
    "ETHANOL": "liquid-bulk/biofuels/ethanol",
    "ALCOOL": "liquid-bulk/biofuels/ethanol",
    "ENXOFRE A GRANEL": "dry-bulk/minerals/sulphur",
    "SAL A GRANEL": "dry-bulk/minerals/salt",
    "PRODUTOS QUIMICOS": "liquid-bulk/chemicals/chemicals-unspecified",
    "OLEO LUBRIFICANTE": "liquid-bulk/refined-products/lubricants",
    "GAS LIQUEFEITO": "gas/liquefied-gases/liquefied-gas-unspecified",
}

#: Santos values that say nothing about the cargo.
SANTOS_SILENT = {"OUTROS", "0"}

SMALL = """
[[group]]
name = "Dry Bulk"
aliases = ["granel sólido"]

[[group.subgroup]]
name = "Coal"
aliases = []

[[group.subgroup.leaf]]
name = "Thermal Coal"
aliases = ["steam coal"]

[[group.subgroup.leaf]]
name = "Coking Coal"
aliases = ["met coal"]
"""


@pytest.fixture(scope="module")
def taxonomy() -> Taxonomy:
    return default_taxonomy()


def _santos_goods() -> set[str]:
    with SANTOS_LINEUP.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter=";"))
    return {row[column] for row in rows for column in ("first_goods", "second_goods")}


@pytest.mark.parametrize(("raw", "leaf_id"), sorted(SANTOS_GOODS.items()))
def test_santos_goods_resolve_to_their_leaf(taxonomy, raw, leaf_id):
    leaf = taxonomy.resolve(raw)
    assert leaf is not None and leaf.id == leaf_id


@pytest.mark.skipif(not SANTOS_LINEUP.exists(), reason="the shared Santos lineup is not here")
def test_every_goods_value_of_the_real_santos_lineup_is_known(taxonomy):
    goods = _santos_goods()
    assert goods - SANTOS_SILENT == set(SANTOS_GOODS)
    assert all(taxonomy.resolve(raw) is None for raw in goods & SANTOS_SILENT)


def test_santos_names_land_in_the_expected_levels(taxonomy):
    soy = taxonomy.resolve("SOJA A GRANEL")
    assert (soy.name, soy.subgroup, soy.group) == ("Soybeans", "Grains", "Dry Bulk")
    assert taxonomy.resolve("OLEO DIESEL").name == "Diesel/Gasoil"
    assert taxonomy.resolve("OLEO DIESEL").group == "Liquid Bulk"
    assert taxonomy.resolve("CONTEINERES VAZIOS").name == "Empty Containers"
    assert taxonomy.resolve("CONTEINERES CHEIOS").group == "Containers"
    assert taxonomy.resolve("BANKER").name == "Bunker Fuel"


@pytest.mark.parametrize("raw", ["Açúcar", "acucar", "AÇÚCAR!", "  a ç ú c a r  ", "azúcar"])
def test_case_accents_punctuation_and_spacing_are_ignored(taxonomy, raw):
    assert taxonomy.resolve(raw).name == "Sugar (Unspecified)"


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("maíz", "Corn"),
        ("Maiz a granel", "Corn"),
        ("trigo", "Wheat"),
        ("cebada", "Barley"),
        ("harina de soja", "Soybean Meal"),
        ("sosa cáustica", "Caustic Soda"),
        ("aceite de palma", "Palm Oil"),
        ("contenedores vacíos", "Empty Containers"),
        ("gasóleo", "Diesel/Gasoil"),
        ("steam coal", "Thermal Coal"),
        ("Óleo de soja", "Soybean Oil"),
    ],
)
def test_spanish_portuguese_and_english_aliases(taxonomy, raw, name):
    assert taxonomy.resolve(raw).name == name


@pytest.mark.parametrize("raw", ["OUTROS", "0", "others", "", "   ", "!!", "unobtainium", "Forest Products"])
def test_values_that_say_nothing_stay_unresolved(taxonomy, raw):
    assert taxonomy.resolve(raw) is None


def test_a_leaf_name_or_id_resolves(taxonomy):
    assert taxonomy.resolve("thermal coal").id == "dry-bulk/coal/thermal-coal"
    assert taxonomy.resolve("dry-bulk/coal/thermal-coal").name == "Thermal Coal"


def test_an_operator_mapping_wins_over_aliases(taxonomy):
    mappings = {lookup_key("SOJA A GRANEL"): "dry-bulk/animal-feed/soybean-meal"}
    assert taxonomy.resolve("Soja a granel", mappings).name == "Soybean Meal"
    assert taxonomy.resolve("SOJA", mappings).name == "Soybeans"


def test_an_operator_mapping_resolves_an_unknown_string(taxonomy):
    mappings = {"outros": "general-cargo/breakbulk/general-cargo-unspecified"}
    assert taxonomy.resolve("Outros.", mappings).name == "General Cargo (Unspecified)"


def test_a_mapping_to_an_unknown_leaf_raises(taxonomy):
    with pytest.raises(KeyError, match="no/such/leaf"):
        taxonomy.resolve("OUTROS", {"outros": "no/such/leaf"})


def test_leaf_by_id(taxonomy):
    assert taxonomy.leaf("liquid-bulk/biofuels/ethanol").name == "Ethanol"
    with pytest.raises(KeyError):
        taxonomy.leaf("liquid-bulk/biofuels")


def test_parse_filter_accepts_names_of_every_level(taxonomy):
    assert taxonomy.parse_filter("coal, THERMAL coal ,dry bulk") == ("Coal", "Thermal Coal", "Dry Bulk")
    assert taxonomy.parse_filter("jet fuel / kerosene,Jet Fuel/Kerosene") == ("Jet Fuel/Kerosene",)
    parsed = taxonomy.parse_filter("SUGAR(unspecified) , Diesel Gasoil")
    assert parsed == ("Sugar (Unspecified)", "Diesel/Gasoil")


def test_parse_filter_rejects_an_unknown_name_with_suggestions(taxonomy):
    with pytest.raises(ValidationError) as caught:
        taxonomy.parse_filter("wheat,coall")
    details = caught.value.details
    assert details["parameter"] == "commodity"
    assert "'coall'" in details["reason"] and "'Coal'" in details["reason"]
    assert details["suggestions"][0] == "Coal"
    assert 1 <= len(details["suggestions"]) <= 3
    assert caught.value.status == 400


def test_parse_filter_matches_names_not_aliases_but_suggests_from_them(taxonomy):
    with pytest.raises(ValidationError) as caught:
        taxonomy.parse_filter("soja")
    assert caught.value.details["suggestions"][0] == "Soybeans"


@pytest.mark.parametrize("value", ["", "coal,,wheat", "coal, "])
def test_parse_filter_rejects_an_empty_item(taxonomy, value):
    with pytest.raises(ValidationError) as caught:
        taxonomy.parse_filter(value)
    assert caught.value.details["parameter"] == "commodity"


def test_matching_leaves_follow_the_row_rule(taxonomy):
    names = taxonomy.parse_filter("Coal,Wheat")
    matched = taxonomy.matching_leaves(names)
    assert {leaf.name for leaf in matched} >= {"Thermal Coal", "Coking Coal", "Wheat"}
    assert all({leaf.name, leaf.subgroup, leaf.group} & set(names) for leaf in matched)
    rest = set(taxonomy.leaves) - set(matched)
    assert not any({leaf.name, leaf.subgroup, leaf.group} & set(names) for leaf in rest)


def test_hierarchy_is_consistent(taxonomy):
    groups = taxonomy.groups()
    assert groups == sorted(groups)
    assert {"Dry Bulk", "Liquid Bulk", "Gas", "Containers", "Vehicles", "General Cargo"} <= set(groups)
    for leaf in taxonomy.leaves:
        assert leaf.group in groups
        assert leaf.subgroup in taxonomy.subgroups(leaf.group)
        assert leaf.id.count("/") == 2
        assert taxonomy.leaf(leaf.id) is leaf
    used = {leaf.subgroup for leaf in taxonomy.leaves}
    assert used == set(taxonomy.subgroups())


def test_names_are_unique_across_levels(taxonomy):
    names = taxonomy.all_names()
    assert len(names) == len(taxonomy.leaves) + len(taxonomy.subgroups()) + len(taxonomy.groups())
    assert len({lookup_key(name) for name in names}) == len(names)


def test_taxonomy_is_immutable_and_cached(taxonomy):
    assert default_taxonomy() is taxonomy
    with pytest.raises(dataclasses.FrozenInstanceError):
        taxonomy.leaves = ()


@given(st.data())
def test_any_spelling_of_an_alias_resolves_to_its_leaf(data):
    taxonomy = default_taxonomy()
    leaf = data.draw(st.sampled_from(taxonomy.leaves))
    alias = data.draw(st.sampled_from((leaf.name, *leaf.aliases)))
    # Change the case of each character and put punctuation or spaces between them.
    noise = st.sampled_from(["", "", " ", "-", ".", "/", "  "])
    spelt = "".join(
        (c.upper() if data.draw(st.booleans()) else c.lower()) + data.draw(noise) for c in alias
    )
    assert taxonomy.resolve(spelt) == leaf


def test_small_taxonomy_from_text():
    small = Taxonomy.from_toml(SMALL)
    assert small.resolve("Steam-Coal").id == "dry-bulk/coal/thermal-coal"
    assert small.all_names() == ["Coal", "Coking Coal", "Dry Bulk", "Thermal Coal"]
    assert small.resolve("granel sólido") is None  # group aliases never resolve


def test_a_leaf_may_be_the_catch_all_of_its_own_subgroup():
    small = Taxonomy.from_toml(SMALL.replace('["met coal"]', '["met coal", "COAL"]'))
    assert small.resolve("coal").name == "Coking Coal"
    assert small.parse_filter("coal") == ("Coal",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SMALL.replace('name = "Coking Coal"', 'name = "Dry Bulk"'), "used twice"),
        (SMALL.replace('name = "Coking Coal"', 'name = "thermal-coal"'), "used twice"),
        (SMALL.replace('["met coal"]', '["Steam Coal"]'), "listed by both"),
        (SMALL.replace('["met coal"]', '["thermal coal"]'), "is the name of"),
        (SMALL.replace('["granel sólido"]', '["steam coal"]'), "listed by both"),
        (SMALL.replace('["steam coal"]', '["steam coal", ""]'), "empty alias"),
        (SMALL.replace("aliases = []", 'alias = ["x"]'), "unknown keys"),
        (SMALL.replace("[[group.subgroup.leaf]]", "[[group.subgroup.leaves]]"), "unknown keys: leaves"),
        (SMALL.replace('name = "Coal"', 'name = "Coal"\nslug = "Not A Slug"'), "invalid slug"),
        (SMALL + "[[group]]\nname = 'Gas'\n", "no [[subgroup]]"),
        (SMALL + "[[group.subgroup]]\nname = 'Lignite'\n", "no [[leaf]]"),
        ("[[group]]\nname = ", "not valid TOML"),
    ],
)
def test_loader_rejects_a_broken_taxonomy(text, message):
    with pytest.raises(TaxonomyError, match=re.escape(message)):
        Taxonomy.from_toml(text)


def test_a_slug_pins_the_id_of_a_renamed_node():
    renamed = SMALL.replace('name = "Thermal Coal"', 'name = "Steam Coal (Thermal)"\nslug = "thermal-coal"')
    renamed = renamed.replace('["steam coal"]', "[]")
    assert Taxonomy.from_toml(renamed).leaf("dry-bulk/coal/thermal-coal").name == "Steam Coal (Thermal)"
