"""Keys and tokens kept out of logs (contract C8; issue 16 item 7).

`redact` masks API keys and share-link tokens in a path or a message. The API's own
log lines go through it where they are made (`api.base`, `api.app.log_request`);
`RedactingFilter` puts every other line through it too (Tornado's `tornado.general`,
which logs a malformed header's raw value, `tornado.access` of mounted applications,
Bokeh's loggers, tracebacks): the server entry point installs it on the handlers of
the process's log (`cli.logs.configure`).
"""

from __future__ import annotations

import logging
import re

#: A share-link path anywhere in a text, up to the end of its token.
_SHARE_PATH = re.compile(r"/v1/share/[^/?#\s'\"]+")
#: Key-shaped text (C5: `lk_` and 32 hex digits; any case or length, typos included).
_KEY_LIKE = re.compile(r"(?<![0-9a-z])lk_[0-9a-z]+", re.IGNORECASE)
#: Token-shaped text (itsdangerous: base64url payload, a dot, a 27-character signature).
_TOKEN_LIKE = re.compile(r"\.?[\w-]+\.[\w-]{27}(?![\w-])", re.ASCII)
#: A share-link token by its prefix (`sl_`), also cut short or altered.
_SHARE_TOKEN = re.compile(r"(?<![0-9a-z])sl_[\w.-]+", re.IGNORECASE | re.ASCII)


def redact(text: str) -> str:
    """A request path or message fit for logs (C8): share-link tokens, and keys or
    tokens a client put anywhere else in a path or parameter, are masked."""
    if "_" not in text and "." not in text and "/v1/share/" not in text:
        return text  # no key (`lk_`), token (`.`) or share path: the common path, fast
    text = _SHARE_TOKEN.sub("<token>", _SHARE_PATH.sub("/v1/share/<token>", text))
    return _TOKEN_LIKE.sub("<token>", _KEY_LIKE.sub("lk_<redacted>", text))


class RedactingFilter(logging.Filter):
    """A handler filter that puts each record's message and traceback through
    `redact` before any formatter sees them."""

    _tracebacks = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
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
