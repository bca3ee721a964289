"""The headers every explorer response carries (issue 45 item 2): a
Content-Security-Policy as strict as Panel and Bokeh allow, and `nosniff`.

Bokeh's pages carry their document as inline scripts and Panel's callbacks are
compiled in the page (`new Function`), so scripts need 'unsafe-inline' and
'unsafe-eval'; everything else is held to the explorer's own origin: no plug-ins
(`object-src 'none'`), no framing by another site (`frame-ancestors 'none'`, the
clickjacking defence), forms and `<base>` only to itself, connections (the
websocket) only back to it. Escaping every value (`explorer.markup`) is what keeps
data from becoming script; the policy is the second wall behind it.

Set by an output transform on the explorer's Tornado application, so that Bokeh's
own handlers (the page, its static files, the websocket's handshake) carry them as
much as the explorer's login and logout pages.
"""

from __future__ import annotations

from tornado.httputil import HTTPHeaders
from tornado.web import OutputTransform

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self' 'unsafe-inline' 'unsafe-eval' blob:",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


class ExplorerHeaders(OutputTransform):
    """Adds the policy and `X-Content-Type-Options: nosniff` to every response."""

    def transform_first_chunk(self, status_code: int, headers: HTTPHeaders, chunk: bytes, finishing: bool):
        headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        headers["X-Content-Type-Options"] = "nosniff"
        return status_code, headers, chunk
