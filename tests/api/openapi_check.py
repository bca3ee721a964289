"""Checks a real response against the service's OpenAPI document (jsonschema, 2020-12).

`check(document, path, response)` fails when the status is not documented for the
operation, a required header is missing, a documented header or the JSON body does
not match its schema, or the content type is not one the operation declares.
"""

from __future__ import annotations

from typing import Any

import requests
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

BASE = "urn:lineups:openapi"


class Document:
    """An OpenAPI document made ready to validate with."""

    def __init__(self, document: dict[str, Any]):
        self.document = document
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self.registry = Registry().with_resource(BASE, resource)

    def resolve(self, item: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in item:
            node: Any = self.document
            for part in item["$ref"].removeprefix("#/").split("/"):
                node = node[part]
            item = node
        return item

    def validator(self, schema: dict[str, Any]) -> Draft202012Validator:
        return Draft202012Validator(_rebase(schema), registry=self.registry, format_checker=FormatChecker())

    def check(self, path: str, response: requests.Response) -> None:
        """Fail unless `response` to GET `path` (a template of the document, e.g.
        "/v1/schema/{sourceId}") is what the document promises."""
        operation = self.document["paths"][path]["get"]
        status = str(response.status_code)
        assert status in operation["responses"], f"{path}: status {status} is not documented"
        promised = self.resolve(operation["responses"][status])
        for name, header in promised.get("headers", {}).items():
            header = self.resolve(header)
            value = response.headers.get(name)
            if value is None:
                assert not header.get("required"), f"{path} {status}: header {name} missing"
                continue
            schema = header["schema"]
            data = int(value) if schema.get("type") == "integer" else value
            _valid(self.validator(schema), data, f"{path} {status} header {name}")
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        content = promised.get("content", {})
        if response.request.method == "HEAD":
            return
        assert content_type in content, f"{path} {status}: content type {content_type} not documented"
        if content_type == "application/json":
            _valid(self.validator(content[content_type]["schema"]), response.json(), f"{path} {status} body")


def _rebase(schema: Any) -> Any:
    """Local `#/components/...` references point into the document."""
    if isinstance(schema, dict):
        return {k: (BASE + v if k == "$ref" and v.startswith("#/") else _rebase(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_rebase(v) for v in schema]
    return schema


def _valid(validator: Draft202012Validator, data: Any, where: str) -> None:
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, f"{where}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
