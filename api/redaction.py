"""Keys and tokens kept out of logs (contract C8; issue 16 item 7).

`redact` masks API keys and share-link tokens in a path or a message. The API's own
log lines go through it where they are made (`api.base`, `api.app.log_request`);
`RedactingFilter` puts every other line through it too (Tornado's `tornado.general`,
`tornado.access` of mounted applications, Bokeh's loggers, tracebacks): the server
entry point installs it on the handlers of the process's log (`cli.logs.configure`).

A malformed request is logged by what was wrong and, for a header, the header's
name, never by any of its text (`describe_input_error`): Tornado's "Malformed HTTP
message" line quotes the bad value whole, and a value need not look like a key to
be one (a key after a control character, a key without its `lk_`, the explorer's
session cookie, a websocket's session token; issue 49 item 4).
"""

from __future__ import annotations

import logging
import re
from types import TracebackType

from tornado.httputil import HTTPInputError

#: A share-link or download path anywhere in a text, up to the end of its token.
_SHARE_PATH = re.compile(r"/v1/(share|download)/[^/?#\s'\"]+")
#: Key-shaped text (C5: `lk_` and 32 hex digits; any case or length, typos included).
_KEY_LIKE = re.compile(r"(?<![0-9a-z])lk_[0-9a-z]+", re.IGNORECASE)
#: Token-shaped text (itsdangerous: base64url payload, a dot, a 27-character signature).
_TOKEN_LIKE = re.compile(r"\.?[\w-]+\.[\w-]{27}(?![\w-])", re.ASCII)
#: A share-link token or download ticket by its prefix (`sl_`, `dl_`), also cut short or altered.
_SHARE_TOKEN = re.compile(r"(?<![0-9a-z])[sd]l_[\w.-]+", re.IGNORECASE | re.ASCII)


def redact(text: str) -> str:
    """A request path or message fit for logs (C8): share-link tokens, and keys or
    tokens a client put anywhere else in a path or parameter, are masked."""
    if "_" not in text and "." not in text and "/v1/share/" not in text and "/v1/download/" not in text:
        return text  # no key (`lk_`), token (`.`) or share path: the common path, fast
    text = _SHARE_TOKEN.sub("<token>", _SHARE_PATH.sub(r"/v1/\1/<token>", text))
    return _TOKEN_LIKE.sub("<token>", _KEY_LIKE.sub("lk_<redacted>", text))


#: Where Tornado's message of a malformed request starts quoting the request's text.
_QUOTED = re.compile(r"\s*(?::|b?['\"]|%).*$", re.DOTALL)
#: A header name as HTTP allows it (RFC 9110 token), at most this long in a log line.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")


def describe_input_error(error: HTTPInputError) -> str:
    """What was wrong with a malformed request, without any of its text: Tornado's
    message up to where it quotes the request, and the header's name when a header's
    value was refused ("Invalid header value (X-Api-Key)")."""
    kind = _QUOTED.sub("", str(error)) or "Malformed request"
    name = _refused_header(error.__traceback__) if kind == "Invalid header value" else None
    return f"{kind} ({name})" if name else kind


def _refused_header(trace: TracebackType | None) -> str | None:
    """The name of the header whose value `HTTPHeaders.add` refused (the local of
    the frame that raised: Tornado's error does not say it)."""
    while trace is not None:
        frame = trace.tb_frame
        if frame.f_code.co_name == "add" and frame.f_globals.get("__name__") == "tornado.httputil":
            name = frame.f_locals.get("name")
            if isinstance(name, str) and _HEADER_NAME.fullmatch(name):
                return "-".join(part.capitalize() for part in name.split("-"))
        trace = trace.tb_next
    return None


class RedactingFilter(logging.Filter):
    """A handler filter that puts each record's message and traceback through
    `redact` before any formatter sees them, and logs a malformed request by what
    was wrong with it (`describe_input_error`)."""

    _tracebacks = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, HTTPInputError) for a in record.args):
            record.args = tuple(describe_input_error(a) if isinstance(a, HTTPInputError) else a for a in record.args)
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._tracebacks.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
