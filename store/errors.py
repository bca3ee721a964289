"""The service's errors: one exception type per error code of the seed's section 7.

Each class carries its HTTP status and code, so that the API, the explorer's JSON
answers and the command line (which prints the same body, C11) turn any of them into
the contract's error body in exactly one place: `LineupsError.body()`, sent as
`LineupsError.to_json()`.
"""

from __future__ import annotations

import json
from typing import Any


class LineupsError(Exception):
    """Base of every error the service reports to a client."""

    status: int = 500
    code: str = "INTERNAL_ERROR"

    def __init__(self, message: str, details: Any = None):
        super().__init__(message)
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        """The error body of the seed's section 7."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}

    def to_json(self) -> bytes:
        """`body()` as a response carries it: compact UTF-8 JSON."""
        return json.dumps(self.body(), ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


class Unauthorized(LineupsError):
    status, code = 401, "UNAUTHORIZED"


class Forbidden(LineupsError):
    status, code = 403, "FORBIDDEN"


class NotFound(LineupsError):
    status, code = 404, "NOT_FOUND"


class MethodNotAllowed(LineupsError):
    """C5: methods other than GET/HEAD are 405 with code NOT_FOUND."""

    status, code = 405, "NOT_FOUND"


class ValidationError(LineupsError):
    status, code = 400, "VALIDATION_ERROR"

    @classmethod
    def parameter(cls, name: str, reason: str) -> "ValidationError":
        """A bad query parameter; `details` names it and the reason (C5)."""
        return cls(f"Invalid parameter '{name}': {reason}", {"parameter": name, "reason": reason})


class RateLimited(LineupsError):
    status, code = 429, "RATE_LIMITED"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class InternalError(LineupsError):
    status, code = 500, "INTERNAL_ERROR"


#: The error codes of the seed's section 7, in its order.
CODES: tuple[str, ...] = tuple(
    dict.fromkeys(kind.code for kind in (Unauthorized, Forbidden, NotFound, ValidationError, RateLimited, InternalError))
)
