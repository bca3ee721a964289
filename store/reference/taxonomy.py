"""The commodity taxonomy of contract C6 and the resolver of raw commodity strings.

The taxonomy ships as package data (`store/reference/data/taxonomy.toml`): groups (L2) hold
subgroups (L1), which hold leaves; every node has a name and aliases. A record's
`commodity_normalized`, `_subgroup` and `_group` are the names of its leaf and of the
leaf's subgroup and group.

- Raw strings resolve at ingest (`Taxonomy.resolve`) by exact match of their lookup
  key (case, accents, punctuation and spacing ignored) against leaf names and aliases;
  an operator's mapping wins over both. A leaf's id (`dry-bulk/coal/thermal-coal`) is
  the commodity part of the merge key (C2.2), so ids must stay stable.
- The `commodity` filter of GET /v1/lineups (`Taxonomy.parse_filter`) takes names of
  any level. A row matches when any of its commodity_normalized, _subgroup or _group
  equals any of the parsed names; `Taxonomy.matching_leaves` gives the same answer as
  a set of leaves, for pushing the filter down to the stored leaf ids (C3).

The loader enforces the rules stated at the top of the data file, because a name in
two levels would make a filter ambiguous and an alias in two leaves would make
resolution depend on file order.
"""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from store.errors import ValidationError
from store.normalize import lookup_key, strip_accents

MAX_SUGGESTIONS = 3
_LEVELS = ("group", "subgroup", "leaf")
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class TaxonomyError(ValueError):
    """The taxonomy text is not valid TOML or breaks one of the C6 rules."""


@dataclass(frozen=True)
class Leaf:
    """A leaf of the taxonomy: what `commodity_normalized` names."""

    id: str
    name: str
    subgroup: str
    group: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Node:
    """A node of any level while the file is checked."""

    level: str
    name: str
    path: tuple[str, ...]  # slugs from the group down to this node
    aliases: tuple[str, ...]
    ancestors: tuple[str, ...]  # names of the enclosing subgroup and group


@dataclass(frozen=True, eq=False)
class Taxonomy:
    """A loaded, immutable taxonomy. Build it with `from_toml`, `from_file` or
    `default_taxonomy()`."""

    leaves: tuple[Leaf, ...]
    _by_id: Mapping[str, Leaf]
    _by_key: Mapping[str, Leaf]  # lookup key of a leaf name or alias -> leaf
    _names: Mapping[str, str]  # lookup key of a name of any level -> that name
    _hints: Mapping[str, str]  # lookup key of an alias of any level -> its node's name
    _subgroups: Mapping[str, tuple[str, ...]]  # group name -> its subgroup names

    @classmethod
    def from_toml(cls, text: str) -> Taxonomy:
        """The taxonomy described by TOML `text`. Raises TaxonomyError when the text is
        not TOML, lacks a level, or repeats a name or alias."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TaxonomyError(f"taxonomy is not valid TOML: {exc}") from exc
        return cls._build(list(_walk(data)))

    @classmethod
    def from_file(cls, path: str | Path) -> Taxonomy:
        """The taxonomy in the TOML file at `path` (see `from_toml`)."""
        return cls.from_toml(Path(path).read_text(encoding="utf-8"))

    @classmethod
    def _build(cls, nodes: list[_Node]) -> Taxonomy:
        names = _check_names(nodes)
        by_id: dict[str, Leaf] = {}
        by_key: dict[str, Leaf] = {}
        hints: dict[str, str] = {}
        subgroups: dict[str, list[str]] = {}
        for node in nodes:
            if node.level == "subgroup":
                subgroups[node.ancestors[0]].append(node.name)
            elif node.level == "group":
                subgroups[node.name] = []
            alias_keys = _check_aliases(node, names, hints)
            hints.update(dict.fromkeys(alias_keys, node.name))
            if node.level == "leaf":
                leaf = Leaf("/".join(node.path), node.name, *node.ancestors, node.aliases)
                if leaf.id in by_id:
                    raise TaxonomyError(f"two leaves have the id {leaf.id!r}: set a distinct slug")
                by_id[leaf.id] = leaf
                by_key.update(dict.fromkeys([lookup_key(node.name), *alias_keys], leaf))
        return cls(
            leaves=tuple(by_id.values()),
            _by_id=MappingProxyType(by_id),
            _by_key=MappingProxyType(by_key),
            _names=MappingProxyType(names),
            _hints=MappingProxyType(hints),
            _subgroups=MappingProxyType({g: tuple(s) for g, s in subgroups.items()}),
        )

    def resolve(self, raw: str | None, mappings: Mapping[str, str] | None = None) -> Leaf | None:
        """The leaf that a raw commodity string names, or None while it is unresolved.

        `mappings` are the operator's mappings, keyed by `lookup_key(raw)`, valued by
        leaf ids; they win over names and aliases. A leaf's name or id resolves too.
        Raises KeyError when a mapping names a leaf that is not in the taxonomy."""
        if raw is None:
            return None
        key = lookup_key(raw)
        if not key:
            return None
        if mappings and key in mappings:
            try:
                return self.leaf(mappings[key])
            except KeyError:
                message = f"the mapping of {raw!r} names unknown leaf {mappings[key]!r}"
                raise KeyError(message) from None
        return self._by_id.get(raw.strip().lower()) or self._by_key.get(key)

    def leaf(self, leaf_id: str) -> Leaf:
        """The leaf with id `leaf_id`. Raises KeyError when there is none."""
        return self._by_id[leaf_id]

    def groups(self) -> list[str]:
        """The group (L2) names, sorted."""
        return sorted(self._subgroups)

    def subgroups(self, group: str | None = None) -> list[str]:
        """The subgroup (L1) names, sorted; only those of `group` when given.
        Raises KeyError for an unknown group."""
        if group is not None:
            return sorted(self._subgroups[group])
        return sorted(name for names in self._subgroups.values() for name in names)

    def all_names(self) -> list[str]:
        """Every group, subgroup and leaf name, sorted: what the filter accepts."""
        return sorted(self._names.values())

    def parse_filter(self, value: str) -> tuple[str, ...]:
        """The canonical names of a `commodity` filter value: comma-separated names of
        any level, matched ignoring case, accents, punctuation and spacing (C6).
        Duplicates are dropped, order is kept. Raises ValidationError (parameter
        "commodity") for an empty item or a name that is in no level; its details add
        `suggestions`, the closest names."""
        names: list[str] = []
        for item in value.split(","):
            text = item.strip()
            if not text:
                raise ValidationError.parameter("commodity", "an empty commodity name in the list")
            name = self._names.get(lookup_key(text))
            if name is None:
                raise self._unknown_name(text)
            if name not in names:
                names.append(name)
        return tuple(names)

    def suggest(self, text: str, limit: int = MAX_SUGGESTIONS) -> list[str]:
        """Up to `limit` names close to `text`, best first: the node that lists `text`
        as an alias (so "soja" suggests "Soybeans"), then close spellings of names."""
        found = [self._hints[key]] if (key := lookup_key(text)) in self._hints else []
        # Spellings are compared without case or accents, then mapped back to names.
        plain = {strip_accents(name).lower(): name for name in self._names.values()}
        close = difflib.get_close_matches(strip_accents(text).lower(), plain, n=limit)
        for match in close:
            if plain[match] not in found:
                found.append(plain[match])
        return found[:limit]

    def search(self, text: str = "") -> tuple[Leaf, ...]:
        """The leaves whose name, alias, subgroup or group contains `text` (compared
        ignoring case, accents, punctuation and spacing), in taxonomy order; every leaf
        for an empty `text`."""
        wanted = lookup_key(text)
        return tuple(
            leaf
            for leaf in self.leaves
            if any(wanted in lookup_key(name) for name in (leaf.name, *leaf.aliases, leaf.subgroup, leaf.group))
        )

    def level_of(self, text: str) -> str | None:
        """"group", "subgroup" or "leaf" when `text` is the name of a node of that level
        (compared as the filter compares), else None."""
        name = self._names.get(lookup_key(text))
        if name is None:
            return None
        if name in self._subgroups:
            return "group"
        return "subgroup" if any(name in subs for subs in self._subgroups.values()) else "leaf"

    def suggest_leaves(self, text: str, limit: int = MAX_SUGGESTIONS) -> list[str]:
        """Leaf names for a `text` that is no leaf, best first: the leaves of the
        subgroup or group it names (all of them), else the leaf whose alias it is,
        then close spellings of leaf names and aliases."""
        level = self.level_of(text)
        if level in ("group", "subgroup"):
            name = self._names[lookup_key(text)]
            return [leaf.name for leaf in self.leaves if name in (leaf.subgroup, leaf.group)]
        hit = self._by_key.get(lookup_key(text))
        found = [hit.name] if hit else []
        spellings = {strip_accents(name).lower(): leaf.name for leaf in self.leaves for name in (leaf.name, *leaf.aliases)}
        for match in difflib.get_close_matches(strip_accents(text).lower(), spellings, n=limit * 3):
            if spellings[match] not in found:
                found.append(spellings[match])
        for word in text.split() if not found else ():  # "soy stuff": the leaves of "soy"
            found += [leaf.name for leaf in self.search(word) if len(word) >= 3 and leaf.name not in found]
        return found[:limit]

    def matching_leaves(self, names: Iterable[str]) -> tuple[Leaf, ...]:
        """The leaves a filter on canonical `names` selects: those whose name, subgroup
        or group is one of them. A resolved row matches exactly when its leaf is here."""
        wanted = set(names)
        return tuple(
            leaf for leaf in self.leaves if wanted & {leaf.name, leaf.subgroup, leaf.group}
        )

    def _unknown_name(self, text: str) -> ValidationError:
        suggestions = self.suggest(text)
        reason = f"{text!r} is not a commodity group, subgroup or leaf name"
        if suggestions:
            reason += f"; did you mean {', '.join(repr(s) for s in suggestions)}?"
        error = ValidationError.parameter("commodity", reason)
        error.details["suggestions"] = suggestions
        return error


@functools.lru_cache(maxsize=1)
def default_taxonomy() -> Taxonomy:
    """The taxonomy that ships with the product (read once, on first use)."""
    data = resources.files("store.reference") / "data" / "taxonomy.toml"
    return Taxonomy.from_toml(data.read_text(encoding="utf-8"))


def _walk(data: Mapping[str, Any]) -> Iterable[_Node]:
    """Every node of the parsed file, each group before its subgroups before their
    leaves, after checking the file's shape."""
    _check_keys(data, {"group"}, "the taxonomy")
    groups = _children(data, "group", "the taxonomy")
    for group in groups:
        g = _node(group, "group", (), ())
        yield g
        for subgroup in _children(group, "subgroup", f"group {g.name!r}"):
            s = _node(subgroup, "subgroup", g.path, (g.name,))
            yield s
            for leaf in _children(subgroup, "leaf", f"subgroup {s.name!r}"):
                yield _node(leaf, "leaf", s.path, (s.name, g.name))


def _children(table: Mapping[str, Any], level: str, where: str) -> list[Mapping[str, Any]]:
    """The non-empty array of `level` tables under `table`: a group without subgroups
    or a subgroup without leaves would leave the hierarchy with holes."""
    children = table.get(level)
    if not isinstance(children, list) or not children:
        raise TaxonomyError(f"{where} has no [[{level}]] entries")
    if not all(isinstance(child, dict) for child in children):
        raise TaxonomyError(f"{where}: every {level} must be a table")
    return children


def _node(
    table: Mapping[str, Any], level: str, parent: tuple[str, ...], ancestors: tuple[str, ...]
) -> _Node:
    """One node, its name, slug and aliases checked for type and form."""
    below = _LEVELS[_LEVELS.index(level) + 1 :]
    name = table.get("name")
    if not isinstance(name, str) or not lookup_key(name):
        raise TaxonomyError(f"a {level} under {'/'.join(parent) or 'the root'} has no usable name")
    _check_keys(table, {"name", "aliases", "slug", *below[:1]}, f"{level} {name!r}")
    slug = table.get("slug", _slugify(name))
    if not isinstance(slug, str) or not _SLUG.match(slug):
        raise TaxonomyError(f"{level} {name!r} has an invalid slug {slug!r}")
    aliases = table.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise TaxonomyError(f"the aliases of {level} {name!r} must be a list of strings")
    return _Node(level, name.strip(), (*parent, slug), tuple(aliases), ancestors)


def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    # A misspelt key ("alias") would otherwise be ignored without a word.
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise TaxonomyError(f"{where} has unknown keys: {', '.join(unknown)}")


def _check_names(nodes: list[_Node]) -> dict[str, str]:
    """Lookup key -> name for every node. Raises TaxonomyError for two nodes whose
    names are equal once case, accents, punctuation and spacing are ignored."""
    names: dict[str, str] = {}
    for node in nodes:
        key = lookup_key(node.name)
        if key in names:
            raise TaxonomyError(f"the name {node.name!r} is used twice (also as {names[key]!r})")
        names[key] = node.name
    return names


def _check_aliases(node: _Node, names: Mapping[str, str], owners: Mapping[str, str]) -> list[str]:
    """The lookup keys of `node`'s aliases, without those equal to its own name.
    Raises TaxonomyError for an alias that is another node's name (other than a leaf's
    own subgroup or group) or that another node lists (`owners`: key -> node name)."""
    keys: list[str] = []
    for alias in node.aliases:
        key = lookup_key(alias)
        if not key:
            raise TaxonomyError(f"{node.level} {node.name!r} has an empty alias {alias!r}")
        named = names.get(key)
        if named == node.name:
            continue
        if named is not None and not (node.level == "leaf" and named in node.ancestors):
            raise TaxonomyError(f"the alias {alias!r} of {node.name!r} is the name of {named!r}")
        if owners.get(key, node.name) != node.name:
            raise TaxonomyError(f"the alias {alias!r} is listed by both {owners[key]!r} and {node.name!r}")
        keys.append(key)
    return keys


def _slugify(name: str) -> str:
    """The slug of a name: 'Diesel/Gasoil' -> 'diesel-gasoil'."""
    return re.sub(r"[^a-z0-9]+", "-", strip_accents(name).lower()).strip("-")
