"""report.html: the Markdown report as one self-contained page that opens offline.

The page is BENCHMARK_REPORT.md rendered to HTML (markdown-it-py, CommonMark
plus tables), with every plot embedded as a base64 ``data:`` URI and the CSS
inline: no external script, style sheet, font or image, so the file can be
mailed or archived on its own.

The rendered Markdown goes through nh3 (the ammonia sanitizer) before the plots are embedded: only
the elements a report is made of are kept (headings, paragraphs, lists, tables, code, links,
images, ``<details>``), without scripts, event handlers, styles other than a cell's alignment,
or links of other schemes than http(s) and mailto. The Markdown writers already keep every field
from becoming markup (``tables.text``/``cell``/``fence``); this is the page's own guarantee.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from benchlab.names.results_files import REPORT_HTML

_CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
       sans-serif; line-height: 1.5; color: #1b1b1b; background: #fff; margin: 0; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { border-bottom: 2px solid #0072B2; padding-bottom: 6px; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 2em; }
h3 { margin-top: 1.6em; }
table { border-collapse: collapse; margin: 12px 0; font-size: 14px; display: block;
        overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; white-space: nowrap; }
th { background: #f3f6f9; }
tr:nth-child(even) td { background: #fafbfc; }
td[style*="right"], th[style*="right"] { font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; display: block; margin: 8px 0; border: 1px solid #eee; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
            font-size: 13px; }
pre { background: #f6f8fa; padding: 10px 12px; overflow-x: auto; border-radius: 4px; }
p > em:only-child { color: #555; font-size: 14px; }
details { margin: 8px 0; }
summary { cursor: pointer; }
"""

_IMG_SRC = re.compile(r'src="(plots/[^"]+\.png)"')


_TAGS = {"a", "blockquote", "br", "code", "del", "details", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "img",
         "li", "ol", "p", "pre", "s", "strong", "summary", "table", "tbody", "td", "th", "thead", "tr", "ul"}
_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "td": {"style"}, "th": {"style"},
               "ol": {"start"}}


def sanitize(body: str) -> str:
    """``body`` (HTML) with only the report's own kinds of element left (module docstring)."""
    import nh3

    return str(nh3.clean(body, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                         filter_style_properties={"text-align"}))


def _markdown_to_html(text: str) -> str:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    return sanitize(str(md.render(text)))


def render_html(markdown_text: str, folder: Path, title: str) -> str:
    """The page for ``markdown_text``, whose ``plots/*.png`` images are read from ``folder``."""
    body = _markdown_to_html(markdown_text)

    def embed(match: re.Match[str]) -> str:
        data = (folder / match.group(1)).read_bytes()
        return f'src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}"'

    body = _IMG_SRC.sub(embed, body)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )


def write_html(markdown_text: str, folder: Path, title: str) -> Path:
    """Write ``report.html`` into ``folder`` (where the plots are) and return its path."""
    path = folder / REPORT_HTML
    from benchlab.report.atomic import write_text_atomic

    write_text_atomic(path, render_html(markdown_text, folder, title))
    return path
