"""The client's error: an error answer of the service (C5)."""

from __future__ import annotations

from typing import Any

import requests


class ApiError(Exception):
    """An error answer of the service: its HTTP `status`, the contract's `code`,
    `message` and `details` (C5), and the `request_id` to quote to its operators."""

    def __init__(self, status: int, code: str, message: str, details: Any = None, request_id: str | None = None):
        super().__init__(f"{status} {code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.status, self.code, self.message, self.details, self.request_id = status, code, message, details, request_id

    @classmethod
    def of(cls, response: requests.Response) -> "ApiError":
        try:
            error = response.json()["error"]
            code, message, details = error["code"], error["message"], error.get("details")
        except (ValueError, KeyError, TypeError):
            code, message, details = "HTTP_ERROR", response.text[:200] or response.reason, None
        return cls(response.status_code, code, message, details, response.headers.get("X-Request-Id"))

    @property
    def cursor_expired(self) -> bool:
        """Whether this is the change feed's "start again" answer."""
        return self.code == "VALIDATION_ERROR" and isinstance(self.details, dict) and self.details.get("reason") == "cursor_expired"
