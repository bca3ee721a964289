"""Hypothesis on the parsers of client input (issue 9): any text as a cursor, a share
token, a date or a limit gives the contract's answer (a value, ValidationError naming
the parameter, or Unauthorized) and never another exception; what the service
encodes, it decodes to the original.

Cursors are also fuzzed *behind* their signature (payloads signed with the service's
secret, as only the service can), so that a cursor that verifies can still never
make the keyset search fail otherwise than with a 400.
"""

from __future__ import annotations

import datetime as dt
import string
import uuid

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from itsdangerous import URLSafeSerializer

from api.cursors import SALT as CURSOR_SALT
from api.cursors import CursorCodec
from store.access import links
import pipeline_reference as pipeline
from store.database.db import transaction
from store.errors import Unauthorized, ValidationError
from store.fields import VESSEL_STATUSES
from store.query import DEFAULT_LIMIT, MAX_LIMIT, parse_query
from store.database.schema import Buyer
from store.reference.taxonomy import default_taxonomy
from tests.api.conftest import open_store
from tests.api.tiny_data import new_buyer

SECRETS = ("fuzz-secret-new", "fuzz-secret-old")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TOKEN_CHARS = string.ascii_letters + string.digits + "-_."
#: Any text a query string can carry (UTF-8 decoded: no surrogates), or look-alikes.
texts = st.one_of(st.text(), st.text(alphabet=TOKEN_CHARS, min_size=1), st.from_regex(r"\d{4}-\d{2}-\d{2}", fullmatch=True))
#: Keyset positions as `store.query.position_of` makes them.
positions = st.tuples(st.one_of(st.none(), st.integers(-(2**63) + 1, 2**63 - 1)), st.text()).map(list)


def parse(args):
    return parse_query(args, default_taxonomy().parse_filter)


# ---------------------------------------------------------------- cursors
@FUZZ
@given(cursor=texts, bound=st.text(min_size=1))
def test_any_text_as_a_cursor_is_a_position_or_a_400(cursor, bound):
    with pytest.raises(ValidationError) as refused:
        CursorCodec(SECRETS).decode(cursor, bound)
    assert refused.value.details["parameter"] == "cursor"


@FUZZ
@given(position=positions, bound=st.text(min_size=1))
def test_cursor_encode_then_decode_gives_the_position(position, bound):
    codec = CursorCodec(SECRETS)
    cursor = codec.encode(position, bound)
    assert set(cursor) <= set(TOKEN_CHARS)  # URL-safe (C4)
    assert codec.decode(cursor, bound) == position
    assert CursorCodec(SECRETS[1:] + ("newer",)).decode(CursorCodec(SECRETS[1:]).encode(position, bound), bound) == position
    with pytest.raises(ValidationError):
        codec.decode(cursor, bound + "x")  # another query


@FUZZ
@given(payload=st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                            max_leaves=8),
       limit=st.integers(1, MAX_LIMIT))
def test_a_signed_payload_of_any_shape_pages_or_gives_400(payload, limit, small_result):
    """Only the service can sign; still, whatever it could sign is handled."""
    bound = "q"
    cursor = URLSafeSerializer(list(reversed(SECRETS)), salt=CURSOR_SALT).dumps(payload)
    try:
        position = CursorCodec(SECRETS).decode(cursor, bound)
        pipeline.page(small_result, position, limit)
    except ValidationError as refused:
        assert refused.details["parameter"] == "cursor"


@FUZZ
@given(position=positions, limit=st.integers(1, MAX_LIMIT))
def test_any_position_pages_without_failing(position, limit, small_result):
    rows, after = pipeline.page(small_result, position, limit)
    assert len(rows) <= limit
    assert after is None or after == pipeline.position_of(rows.iloc[-1])


# ---------------------------------------------------------------- share tokens
@pytest.fixture(scope="module")
def link_store(tmp_path_factory):
    """A SQLite store with one buyer and its links (module-wide: Hypothesis runs many
    examples against it)."""
    with open_store("sqlite", tmp_path_factory.mktemp("links")) as store:
        with transaction(store.sessions) as session:
            buyer, _ = new_buyer(session, "Link Buyer", {})
        yield store, buyer.id


@FUZZ
@given(token=texts)
def test_any_text_as_a_share_token_is_401(token, link_store):
    store, _ = link_store
    with store.sessions() as session:
        with pytest.raises(Unauthorized):
            links.open_link(session, token, SECRETS)


@FUZZ
@given(payload=st.one_of(
    st.dictionaries(st.sampled_from(["l", "q", "x"]), st.none() | st.integers() | st.text() | st.dictionaries(st.text(), st.text())),
    st.lists(st.text()), st.text(), st.integers(),
    st.builds(lambda q: {"l": str(uuid.uuid4()), "q": q}, st.dictionaries(st.text(), st.text())),
))
def test_a_signed_token_of_any_shape_is_401(payload, link_store):
    """Signed (only the service can), but not for a link that exists: still 401."""
    store, _ = link_store
    token = URLSafeSerializer(list(reversed(SECRETS)), salt=links.SALT).dumps(payload)
    with store.sessions() as session:
        with pytest.raises(Unauthorized):
            links.open_link(session, token, SECRETS)


#: A text filter's value as the query allows it (at most 200 characters, no control
#: character: issue 49 item 9).
filter_text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=200).filter(str.strip)
query_args = st.fixed_dictionaries({}, optional={
    "port": st.sampled_from(["BRSSZ", "nlrtm", "SGSIN"]),
    "country": filter_text,
    "port_name": filter_text,
    "from": st.dates().map(dt.date.isoformat),
    "latest": st.sampled_from(["true", "FALSE"]),
    "commodity": st.sampled_from(["coal", "Soybeans,iron ore", "Dry Bulk"]),
    "status": st.sampled_from(["expected", "Berthed,EXPECTED", "departed, anchored"]),
    "merge": st.sampled_from(["all", "by_source"]),
    "format": st.just("csv"),
})


@FUZZ
@given(args=query_args)
def test_link_token_encode_then_open_gives_the_link_and_its_query(args, link_store):
    store, buyer_id = link_store
    with transaction(store.sessions) as session:
        link, token = links.create_link(session, session.get(Buyer, buyer_id), {k: [v] for k, v in args.items()}, SECRETS)
    with store.sessions() as session:
        opened, frozen = links.open_link(session, token, SECRETS, count_use=False)
        assert opened.id == link.id
        # The frozen query is the one asked for (format aside: a link is always CSV).
        asked = parse({k: [v] for k, v in args.items() if k != "format"})[0]
        assert parse(frozen)[0] == asked
        # ... also after a roll-over to a newer secret (the old one still verifies).
        assert links.open_link(session, token, ("newer",) + SECRETS, count_use=False)[0].id == link.id
        with pytest.raises(Unauthorized):
            links.open_link(session, token, ("newer",), count_use=False)


@FUZZ
@given(value=st.one_of(texts, st.lists(st.sampled_from(["expected", "Anchored", " berthed ", "DEPARTED", "moored", ""]),
                                        min_size=1).map(",".join)))
def test_any_text_as_a_status_is_statuses_or_a_400(value):
    """Issue 45 item 4: a status list is the seed's statuses, in its order, or a 400
    that names `status` and lists the allowed values."""
    try:
        query = parse({"status": [value]})[0]
    except ValidationError as refused:
        assert refused.details["parameter"] == "status"
        # An empty value, a control character or a long text is refused before the
        # statuses are read; a value that is no status list lists the allowed ones.
        assert refused.details.get("allowed", list(VESSEL_STATUSES)) == list(VESSEL_STATUSES)
        assert "allowed" in refused.details or not value.strip() or "character" in refused.details["reason"]
        return
    assert query.status and list(query.status) == [s for s in VESSEL_STATUSES if s in query.status]
    assert {item.strip().lower() for item in value.split(",")} == set(query.status)


# ---------------------------------------------------------------- dates and limits
@FUZZ
@given(name=st.sampled_from(["from", "to"]), value=texts)
def test_any_text_as_a_date_is_a_date_or_a_400(name, value):
    try:
        query = parse({name: [value]})[0]
    except ValidationError as refused:
        assert refused.details["parameter"] == name
        return
    day = query.date_from if name == "from" else query.date_to
    assert day.isoformat() == value  # only YYYY-MM-DD is read, and read exactly


@FUZZ
@given(first=st.dates(), last=st.dates())
def test_any_two_dates_filter_or_give_400_never_fail(first, last, small_result):
    """Every valid day, year 1 to 9999, also beyond what a timestamp in ns holds."""
    args = {"from": [first.isoformat()], "to": [last.isoformat()]}
    if first > last:
        with pytest.raises(ValidationError):
            parse(args)
        return
    query = parse(args)[0]
    rows = pipeline.select(small_result, query)
    assert len(rows) <= len(small_result)
    assert parse({k: [v] for k, v in query.to_params().items()})[0] == query  # round trip


@FUZZ
@given(value=st.one_of(texts, st.integers(-10, 1000).map(str), st.binary(max_size=8)))
def test_any_text_as_a_limit_is_1_to_500_or_a_400(value):
    try:
        limit = parse({"limit": [value]})[1]
    except ValidationError as refused:
        assert refused.details["parameter"] == "limit"
        return
    assert 1 <= limit <= MAX_LIMIT and str(limit) == str(int(value if isinstance(value, str) else value.decode()))


def test_no_limit_is_the_default():
    assert parse({})[1] == DEFAULT_LIMIT


# ---------------------------------------------------------------- a small result
@pytest.fixture(scope="module")
def small_result() -> pd.DataFrame:
    """Sorted rows with and without dates, some sharing a date (for keyset ties)."""
    times = pd.to_datetime(["2024-03-01", "2024-03-01", None, "1970-01-01", "2262-04-10", None], utc=True)
    frame = pd.DataFrame({
        "id": [f"row{i}" for i in range(len(times))],
        "combined_date": times,
        "eta": times, "etb": times, "etd": times,
        "port_unlocode": "BRSSZ", "country_name": "Brazil", "port_name": "Santos",
        "commodity_normalized": "Soybeans", "commodity_normalized_subgroup": "Oilseeds",
        "commodity_normalized_group": "Grains",
    })
    return pipeline.sort_rows(frame)
