"""The demo data set (`lineups demo`, `lineups serve --demo`).

Deterministic for a given seed and anchor date: feeds over real ports of the
directory report the same vessel calls with ETA jitter, vessel-name and commodity
spelling variants, blanks (N/A, TBC, TBN) and the odd counterparty disagreement, so
that the merge has real work to do. Everything is written through the same
validation and upsert as a feed file.

It looks like a real market (issue 18.11): each feed reports the trade it is about (a
tanker feed tankers with liquid cargo, a grains feed bulk carriers with grain), every
vessel keeps one type and one deadweight and carries no more than it can, and calls
name their port's berths and terminals.

Two kinds of near-duplicate records are made on purpose, because real feeds make them
and the merge resolves them (issue 19), which the explorer's row detail then shows:
the same vessel reported once with its IMO number and once by name only (a different
vessel key), and the same call reported once as "Iron Ore (Unspecified)" and once as
a specific iron ore leaf (a different commodity key).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Callable

import numpy as np
from store.frames import pd
from sqlalchemy.orm import Session

from store.access import accounts

from store.intake import feeds, ingest, validate

Progress = Callable[[int], None]


@dataclasses.dataclass(frozen=True)
class DemoFeed:
    name: str
    ports: tuple[str, ...]
    frequency: str
    feed_type: str
    ratings: tuple[float, float, float]
    subscription: str  # the demo buyer's subscription
    #: The vessel types it reports (empty: all), and the cargoes (canonical names of
    #: CARGOES; empty: all): what its name says it covers.
    vessel_types: tuple[str, ...] = ()
    cargoes: tuple[str, ...] = ()

    def reports(self, vessel_types: pd.Series, cargoes: pd.Series) -> np.ndarray:
        """Which calls (their vessel types and cargoes) this feed is about."""
        mine = np.ones(len(vessel_types), dtype=bool)
        if self.vessel_types:
            mine &= vessel_types.isin(self.vessel_types).to_numpy()
        if self.cargoes:
            mine &= cargoes.isin(self.cargoes).to_numpy()
        return mine


LIQUID = ("Tanker", "LNG Carrier", "LPG Carrier")
GRAINS = ("Soybeans", "Corn", "Sugar", "Wheat", "Fertilizers", "Soybean Meal")


DEMO_FEEDS: tuple[DemoFeed, ...] = (
    DemoFeed("Brazil Grains Lineup", ("BRSSZ", "BRPNG", "BRRIG", "BRITQ"), "daily", "agency", (4.5, 4.0, 3.5), "active",
             ("Bulk Carrier",), GRAINS),
    DemoFeed("South Atlantic Agency Reports", ("BRSSZ", "BRPNG", "ARROS", "ARBHI"), "daily", "agency", (4.0, 3.5, 4.5), "active"),
    DemoFeed("Pacific Dry Bulk Monitor", ("AUNTL", "AUPHE", "CNQIN", "CNTXG", "KRPUS"), "twice daily", "port authority", (4.5, 4.5, 3.0), "active",
             ("Bulk Carrier",)),
    DemoFeed("Global Tanker Tracker", ("USHOU", "USCRP", "NLRTM", "SGSIN", "BRSSZ"), "hourly", "AIS + agency", (5.0, 3.5, 4.0), "active",
             LIQUID),
    DemoFeed("Iron Ore Watch", ("AUPHE", "BRSPB", "BRVIX", "CNQIN", "ZARCB"), "daily", "broker", (3.5, 4.5, 4.5), "trial",
             ("Bulk Carrier",), ("Iron Ore",)),
    DemoFeed("Europe Ports Lineup", ("NLRTM", "BEANR", "ESALG"), "weekly", "port authority", (3.0, 3.0, 3.0), "cancelled"),
)

#: Commodities by port region: (canonical spelling, spelling variants feeds use,
#: operation, unit, typical quantity, vessel type).
CARGOES: dict[str, list[tuple[str, tuple[str, ...], str, str, float, str]]] = {
    "BR": [
        ("Soybeans", ("soja", "SOJA A GRANEL", "Soya beans"), "load", "MT", 65_000, "Bulk Carrier"),
        ("Corn", ("milho", "MILHO A GRANEL", "Maize"), "load", "MT", 60_000, "Bulk Carrier"),
        ("Sugar", ("açúcar", "ACUCAR A GRANEL", "Raw sugar"), "load", "MT", 45_000, "Bulk Carrier"),
        ("Wheat", ("trigo", "TRIGO A GRANEL"), "disch", "MT", 30_000, "Bulk Carrier"),
        ("Fertilizers", ("fertilizantes", "FERTILIZANTES"), "disch", "MT", 35_000, "Bulk Carrier"),
        ("Iron Ore", ("minério de ferro", "IRON ORE FINES"), "load", "MT", 170_000, "Bulk Carrier"),
        ("Diesel", ("óleo diesel", "OLEO DIESEL", "Gasoil"), "disch", "MT", 40_000, "Tanker"),
        ("Containers", ("CONTEINERES CHEIOS", "containers"), "load", "Units", 2_500, "Container"),
        ("OUTROS", ("OUTROS",), "load", "MT", 5_000, "General Cargo"),
    ],
    "AR": [
        ("Soybean Meal", ("harina de soja", "Soymeal"), "load", "MT", 50_000, "Bulk Carrier"),
        ("Corn", ("maíz", "MAIZ"), "load", "MT", 55_000, "Bulk Carrier"),
        ("Wheat", ("trigo",), "load", "MT", 40_000, "Bulk Carrier"),
        ("Soybean Oil", ("aceite de soja",), "load", "MT", 30_000, "Tanker"),
    ],
    "AU": [
        ("Thermal Coal", ("steam coal", "THERMAL COAL"), "load", "MT", 80_000, "Bulk Carrier"),
        ("Coking Coal", ("met coal", "Metallurgical coal"), "load", "MT", 90_000, "Bulk Carrier"),
        ("Iron Ore", ("iron ore fines", "IRON ORE"), "load", "MT", 180_000, "Bulk Carrier"),
    ],
    "CN": [
        ("Iron Ore", ("iron ore", "IRON ORE FINES"), "disch", "MT", 175_000, "Bulk Carrier"),
        ("Thermal Coal", ("steam coal",), "disch", "MT", 75_000, "Bulk Carrier"),
        ("Soybeans", ("soybeans", "SOYA BEANS"), "disch", "MT", 66_000, "Bulk Carrier"),
    ],
    "KR": [("Coking Coal", ("coking coal",), "disch", "MT", 85_000, "Bulk Carrier")],
    "US": [
        ("Crude Oil", ("crude", "CRUDE OIL"), "load", "BBL", 1_000_000, "Tanker"),
        ("LNG", ("liquefied natural gas", "LNG"), "load", "MT", 70_000, "LNG Carrier"),
        ("Gasoline", ("gasoline", "MOGAS"), "load", "BBL", 300_000, "Tanker"),
        ("LPG", ("propane", "LPG"), "load", "MT", 45_000, "LPG Carrier"),
    ],
    "NL": [
        ("Crude Oil", ("crude oil",), "disch", "BBL", 1_500_000, "Tanker"),
        ("Naphtha", ("naphtha",), "load", "MT", 35_000, "Tanker"),
        ("Thermal Coal", ("steam coal",), "disch", "MT", 120_000, "Bulk Carrier"),
    ],
    "BE": [("Containers", ("containers",), "disch", "Units", 8_000, "Container")],
    "ES": [("Containers", ("containers",), "load", "Units", 6_000, "Container")],
    "SG": [
        ("Fuel Oil", ("fuel oil", "HSFO"), "bunker", "MT", 2_000, "Tanker"),
        ("Jet Fuel", ("jet fuel", "Jet A-1"), "disch", "MT", 60_000, "Tanker"),
    ],
    "ZA": [
        ("Thermal Coal", ("steam coal",), "load", "MT", 150_000, "Bulk Carrier"),
        ("Iron Ore", ("iron ore fines", "IRON ORE"), "load", "MT", 160_000, "Bulk Carrier"),
    ],
}

COMPANIES = (
    "Cargill", "Bunge", "Louis Dreyfus Company", "COFCO International", "Amaggi",
    "Vale", "BHP", "Rio Tinto", "Glencore", "Trafigura", "Vitol", "Shell Trading",
    "Yara", "Mosaic", "Companhia Açucareira São João", "Raízen", "Copersucar",
    "Anglo American", "Fortescue", "Thyssenkrupp", "POSCO", "Baosteel",
    "Petrobras", "ExxonMobil", "TotalEnergies", "Cheniere", "Équipe Maritime Ltda",
)
AGENTS = ("Wilson Sons", "Cargonave", "Williams", "Inchcape Shipping", "GAC", "Navegação São Miguel")
OPERATORS = ("Oldendorff", "Pacific Basin", "Star Bulk", "Frontline", "Maersk", "MSC", "Golden Ocean")
NAME_WORDS = (
    "OCEAN", "STAR", "PACIFIC", "ATLANTIC", "GOLDEN", "SILVER", "NORDIC", "CAPE", "SEA", "BLUE",
    "GRACE", "SPIRIT", "PIONEER", "HARMONY", "FORTUNE", "EAGLE", "PHOENIX", "AURORA", "VICTORY", "DAWN",
)
STATUSES = ("expected", "anchored", "berthed", "departed")
#: Berths and terminals by port and kind of cargo (dry, liquid, containers), named as
#: the ports' own lineups name them; ports not listed use numbered berths.
TERMINALS: dict[str, dict[str, tuple[str, ...]]] = {
    "BRSSZ": {"dry": ("Terminal XXXIX", "TGG", "T-Grão", "Armazém 12A", "Saboó"), "liquid": ("Alamoa", "Ilha Barnabé"),
              "box": ("BTP", "Santos Brasil Tecon", "DP World Santos")},
    "BRPNG": {"dry": ("Berth 212", "Berth 214", "Corredor de Exportação", "Fertimport"), "liquid": ("Cattalini", "Píer Público"),
              "box": ("TCP",)},
    "BRSPB": {"dry": ("CPBS", "Sudeste", "Tecar"), "liquid": ("Berth 1",), "box": ("Sepetiba Tecon",)},
    "BRVIX": {"dry": ("Praia Mole", "Tubarão Pier 1", "Tubarão Pier 2"), "liquid": ("São Torquato",), "box": ("TVV",)},
    "NLRTM": {"dry": ("EMO", "EECV"), "liquid": ("Europoort Maasvlakte Oil Terminal", "Botlek Vopak", "Gate LNG"),
              "box": ("ECT Delta", "APM Maasvlakte II", "Rotterdam World Gateway")},
    "CNQIN": {"dry": ("Qianwan Ore Terminal", "Dongjiakou Ore Berth 1"), "liquid": ("Huangdao Oil Terminal",),
              "box": ("QQCT",)},
    "AUPHE": {"dry": ("Nelson Point", "Finucane Island", "Anderson Point", "South West Creek"), "liquid": ("Utah Point",),
              "box": ("Utah Point",)},
    "AUNTL": {"dry": ("Kooragang K4", "Kooragang K7", "Carrington"), "liquid": ("Mayfield 4",), "box": ("Mayfield 7",)},
    "USHOU": {"dry": ("City Dock 24",), "liquid": ("Enterprise Houston Ship Channel", "Kinder Morgan Pasadena", "Galena Park"),
              "box": ("Barbours Cut", "Bayport")},
    "USCRP": {"dry": ("Bulk Dock 1",), "liquid": ("Cheniere Corpus Christi LNG", "Oil Dock 4", "Moda Ingleside"),
              "box": ("Cargo Dock 9",)},
    "SGSIN": {"dry": ("Jurong Port",), "liquid": ("Pulau Bukom", "Jurong Island", "Eastern Bunkering Anchorage"),
              "box": ("Pasir Panjang", "Tuas")},
    "ZARCB": {"dry": ("RBCT Berth 301", "RBCT Berth 306", "Berth 208"), "liquid": ("Berth 209",), "box": ("Berth 700",)},
}

BLANKS = ("N/A", "TBC", "TBN", "")


#: How many distinct IMO numbers `imo_numbers` can make (its stems are 900000–999998).
MAX_VESSELS = 99_999


def imo_numbers(rng: np.random.Generator, count: int) -> list[str]:
    """`count` (at most MAX_VESSELS) distinct seven-digit IMO numbers with valid check
    digits."""
    stems = rng.choice(np.arange(900_000, 999_999), size=count, replace=False)
    digits = np.array([[int(c) for c in str(s)] for s in stems])
    check = (digits * np.arange(7, 1, -1)).sum(axis=1) % 10
    return [f"{s}{c}" for s, c in zip(stems, check)]


#: Deadweight range (thousands of tonnes) by vessel type.
DWT_RANGES = {
    "Bulk Carrier": (35, 210), "Tanker": (30, 320), "LNG Carrier": (70, 100), "LPG Carrier": (20, 60),
    "Container": (30, 200), "General Cargo": (5, 30),
}
#: Barrels per tonne of oil, to keep a cargo in BBL within the tanker's deadweight.
BBL_PER_TONNE = 7.3


def _vessels(rng: np.random.Generator, count: int) -> pd.DataFrame:
    first = rng.choice(NAME_WORDS, count)
    second = rng.choice(NAME_WORDS, count)
    number = rng.integers(1, 30, count)
    names = [f"{a} {b}" if n > 20 else f"{a} {b} {n}" for a, b, n in zip(first, second, number)]
    return pd.DataFrame({"imo": imo_numbers(rng, count), "name": names})


def _fleet(vessels: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The vessels with a type each (in proportion to the trades) and a deadweight in
    that type's range, drawn from a stream of their own so that the calls' draws stay
    as they were."""
    rng = np.random.default_rng([seed, 18])
    kinds = sorted(DWT_RANGES)
    weights = np.array([{"Bulk Carrier": 10, "Tanker": 5, "Container": 2}.get(k, 1) for k in kinds], dtype=float)
    types = rng.choice(kinds, len(vessels), p=weights / weights.sum())
    low, high = (np.array([DWT_RANGES[t][i] for t in types]) for i in (0, 1))
    dwt = (low + rng.random(len(vessels)) * (high - low)).round() * 1000
    return vessels.assign(type=types, dwt=dwt.astype(np.int64))


def _pick(pools: dict[str, np.ndarray], types: list[str], draws: np.ndarray) -> np.ndarray:
    """For each call, a vessel of its type: the call's draw picks one of that type's pool."""
    return np.array([pools[t][d % len(pools[t])] for t, d in zip(types, draws)], dtype=np.int64)


def _terminals(ports: np.ndarray, types: list[str], seed: int) -> list[str]:
    """A berth or terminal for each call, of its port and kind of cargo."""
    rng = np.random.default_rng([seed, 11])
    draws = rng.integers(0, 1_000_000, len(ports))
    out = []
    for port, kind, draw in zip(ports, types, draws):
        group = "liquid" if kind in LIQUID else "box" if kind == "Container" else "dry"
        names = TERMINALS.get(port, {}).get(group) or tuple(f"Berth {n}" for n in range(1, 9))
        out.append(names[draw % len(names)])
    return out


def _name_variant(name: str, kind: int) -> str:
    return (name, f"MV {name}", name.title(), name.replace(" ", "-"), f"M/V {name.title()}")[kind % 5]


def build_calls(seed: int, calls: int, anchor: dt.date) -> pd.DataFrame:
    """The true vessel calls behind the demo feeds, one row per call."""
    rng = np.random.default_rng(seed)
    ports = sorted({p for f in DEMO_FEEDS for p in f.ports})
    # Large data sets (over ~600,000 calls) share the fleet out among more calls.
    vessels = _fleet(_vessels(rng, min(max(50, calls // 6), MAX_VESSELS)), seed)
    pools = {kind: np.flatnonzero(vessels["type"].to_numpy() == kind) for kind in DWT_RANGES}
    pools = {kind: pool if len(pool) else np.arange(len(vessels)) for kind, pool in pools.items()}
    port = rng.choice(ports, calls)
    cargo_pick = rng.random(calls)
    cargo = [CARGOES[p[:2]][int(r * len(CARGOES[p[:2]]))] for p, r in zip(port, cargo_pick)]
    kinds = [c[5] for c in cargo]
    vessel = _pick(pools, kinds, rng.integers(0, len(vessels), calls))
    base = pd.Timestamp(anchor, tz="UTC")
    eta = base + pd.to_timedelta(rng.integers(-40 * 24, 60 * 24, calls) * 60, unit="min")
    etb = eta + pd.to_timedelta(rng.integers(6, 96, calls), unit="h")
    etd = etb + pd.to_timedelta(rng.integers(12, 120, calls), unit="h")
    now = base + pd.Timedelta(hours=12)
    status = np.where(etd < now, "departed", np.where(etb < now, "berthed", np.where(eta < now, "anchored", "expected")))
    companies = np.array(COMPANIES)
    dwt = vessels["dwt"].to_numpy()[vessel]
    rng.integers(30, 210, calls)  # the deadweight's former draw, kept so that later draws stay
    quantity = np.array([c[4] for c in cargo]) * rng.uniform(0.6, 1.3, calls)
    # No vessel carries more than 95% of its deadweight (a barrel of oil is ~1/7.3 t).
    per_tonne = np.array([BBL_PER_TONNE if c[3] == "BBL" else 1.0 for c in cargo])
    tonnage = np.array([c[3] != "Units" for c in cargo])
    quantity = np.where(tonnage, np.minimum(quantity, 0.95 * dwt * per_tonne), quantity).round(-1)
    return pd.DataFrame(
        {
            "call": np.arange(calls),
            "port": port,
            "berth_terminal": _terminals(port, kinds, seed),
            "vessel_imo": vessels["imo"].to_numpy()[vessel],
            "vessel_name": vessels["name"].to_numpy()[vessel],
            "commodity": [c[0] for c in cargo],
            "variants": [c[1] for c in cargo],
            "operation": [c[2] for c in cargo],
            "quantity_unit": [c[3] for c in cargo],
            "quantity": quantity,
            "vessel_type": kinds,
            "dwt": dwt,
            "eta": eta,
            "etb": etb,
            "etd": etd,
            "vessel_status": status,
            "shipper": companies[rng.integers(0, len(companies), calls)],
            "receiver": companies[rng.integers(0, len(companies), calls)],
            "charterer": companies[rng.integers(0, len(companies), calls)],
            "operator": np.array(OPERATORS)[rng.integers(0, len(OPERATORS), calls)],
            "ship_agent": np.array(AGENTS)[rng.integers(0, len(AGENTS), calls)],
        }
    )


def feed_rows(
    calls: pd.DataFrame, feed_index: int, seed: int, spec: DemoFeed | None = None, share: float = 0.65
) -> pd.DataFrame:
    """What one demo feed reports of the calls at its ports (about `share` of them): a
    frame of strings in the feed-file shape, with that feed's jitter, spellings and
    blanks. `spec` is the feed (default: the demo feed `feed_index`)."""
    spec = spec or DEMO_FEEDS[feed_index]
    rng = np.random.default_rng(seed * 1000 + feed_index)
    mine = calls[calls["port"].isin(spec.ports)]
    mine = mine[rng.random(len(mine)) < share]
    mine = mine[spec.reports(mine["vessel_type"], mine["commodity"])].reset_index(drop=True)
    n = len(mine)
    jitter = pd.to_timedelta(rng.integers(-36, 37, n), unit="h")
    out = pd.DataFrame({"ref": [f"{spec.name[:3].upper()}-{c:07d}" for c in mine["call"]]})
    out["port_unlocode"] = mine["port"]
    # A feed names the berth most of the time, in its own case now and then.
    berth = mine["berth_terminal"].to_numpy(dtype=object)
    spelled = np.random.default_rng([seed, feed_index, 11]).random(n)
    out["berth_terminal"] = np.where(spelled < 0.15, "", np.where(spelled > 0.9, [b.upper() for b in berth], berth))
    drop_imo = rng.random(n) < 0.05
    out["vessel_imo"] = np.where(drop_imo, "", mine["vessel_imo"])
    out["vessel_name"] = [_name_variant(v, k) for v, k in zip(mine["vessel_name"], rng.integers(0, 5, n))]
    out["vessel_type"] = mine["vessel_type"]
    out["dwt"] = mine["dwt"].astype(str)
    out["operation"] = mine["operation"]
    spelled = rng.random(n)
    out["commodity"] = [
        c if s < 0.5 else v[int((s - 0.5) * 2 * len(v))] for c, v, s in zip(mine["commodity"], mine["variants"], spelled)
    ]
    out["quantity"] = (mine["quantity"] * rng.choice([1.0, 1.0, 1.0, 0.98, 1.02], n)).round(-1).astype(str)
    out["quantity_unit"] = mine["quantity_unit"]
    for column in ("eta", "etb", "etd"):
        out[column] = (mine[column] + jitter).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    out["vessel_status"] = mine["vessel_status"]
    for column in ("shipper", "receiver", "charterer", "operator", "ship_agent"):
        out[column] = mine[column]
    disagree = rng.random(n) < 0.02
    out.loc[disagree, "receiver"] = np.array(COMPANIES)[rng.integers(0, len(COMPANIES), int(disagree.sum()))]
    for column in ("etb", "etd", "shipper", "receiver", "charterer", "operator", "ship_agent", "quantity", "dwt"):
        blank = rng.random(n) < 0.08
        out.loc[blank, column] = rng.choice(BLANKS, int(blank.sum()))
    return out


def load_demo(
    session: Session,
    records: int = 5000,
    seed: int = 7,
    anchor: dt.date | None = None,
    progress: Progress | None = None,
) -> dict:
    """Create the demo feeds, buyer, key and subscriptions and ingest `records`
    records. Returns `{"buyer_id", "api_key", "feeds", "records"}`. Does not commit."""
    anchor = anchor or dt.datetime.now(dt.timezone.utc).date()
    ports = sorted({p for f in DEMO_FEEDS for p in f.ports})
    per_call = 0.65 * np.mean([sum(p in f.ports for f in DEMO_FEEDS) for p in ports])
    calls_made = int(records / per_call * 1.1) + 10
    while True:  # feeds report only their trade: make calls until they report enough
        calls = build_calls(seed, calls_made, anchor)
        frames = [feed_rows(calls, i, seed) for i in range(len(DEMO_FEEDS))]
        if sum(len(f) for f in frames) >= records:
            break
        calls_made = calls_made * 3 // 2 + 10
    counts = _allot([len(f) for f in frames], records)
    buyer = accounts.add_buyer(session, "Demo Buyer")
    key, _ = accounts.create_key(session, buyer)
    created, total = [], 0
    for spec, frame, count in zip(DEMO_FEEDS, frames, counts):
        frame = frame.iloc[:count]
        feed = feeds.add_feed(
            session, spec.name, list(spec.ports), spec.frequency, spec.feed_type, *spec.ratings
        )
        frame = frame.assign(_line=np.arange(2, len(frame) + 2))
        clean = validate.validate_frame(frame, name=spec.name)
        report = ingest.upsert(session, feed, clean, progress)
        accounts.set_subscription(session, buyer, feed, spec.subscription)
        created.append({"id": feed.id, "name": feed.name, "subscription": spec.subscription, "records": report.inserted})
        total += report.inserted
    return {"buyer_id": buyer.id, "api_key": key, "feeds": created, "records": total}


def _allot(lengths: list[int], total: int) -> list[int]:
    """Split `total` rows over the feeds in proportion to what each has (`lengths`),
    largest remainders first, so that the counts add up to `total` exactly (or to all
    there is) and no feed is asked for more rows than it has."""
    available = sum(lengths)
    total = min(total, available)
    exact = [n * total / max(1, available) for n in lengths]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(lengths)), key=lambda i: (counts[i] - exact[i], i))
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts
