"""Data as text inside the explorer's Markdown and HTML panes (style rule 12; issue
45 items 1–2).

Panel renders a Markdown pane's text as Markdown *with raw HTML allowed*, and an HTML
pane (a Card's title too) as HTML, so a vessel name, a port name from a feed file, a
feed's name or type from an operator, a share link's name from a buyer or a value
from the page's address would otherwise become markup: `<img onerror=…>` runs
script, `**x**` turns bold, `[x](javascript:…)` becomes a link. Every such value
goes through one of the two functions here, at the place where it meets the pane:

- `md(value)` for Markdown: every ASCII punctuation character becomes a numeric
  character reference, which Markdown shows as that character and never reads as
  syntax (no emphasis, link, heading, HTML tag or table can start), and line breaks
  become spaces (no new block).
- `html_text(value)` for HTML: `html.escape` with quotes.

Both wrap the value in `<bdi>` so that right-to-left text (or a stray U+202E) is
shown in its own direction without reordering the words around it. What the
explorer writes itself (bold labels, line breaks) stays markup.
"""

from __future__ import annotations

import html
import re
import string

_PUNCTUATION = {ord(c): f"&#{ord(c)};" for c in string.punctuation}
_BREAKS = re.compile(r"[\r\n\t\v\f\u0085\u2028\u2029]+")


def md(value: object) -> str:
    """`value` as text in a Markdown pane: shown exactly, never as markup."""
    text = _BREAKS.sub(" ", "" if value is None else str(value))
    return f"<bdi>{text.translate(_PUNCTUATION)}</bdi>"


def html_text(value: object) -> str:
    """`value` as text in an HTML pane (or a Card's title)."""
    return f"<bdi>{html.escape('' if value is None else str(value), quote=True)}</bdi>"
