"""report.html: the report as one self-contained page (no file or network beside it: the style
inline, the plot a base64 PNG), for people who open results in a browser. The same pieces as
report.md, in the same order: the answer, the levels, the plot, doubts, notes, details."""
from __future__ import annotations

import base64
import html
import re

from detect_caches.reports import carveout_report, glossary
from detect_caches.reports.details import DETAIL_HEADER, detail_rows, documented_sentences
from detect_caches.reports.markdown import device_rows, method_lines, note_items
from detect_caches.reports.notes import sentence
from detect_caches.reports.summary import NARROW_HEADER, answer_line, narrow_rows, run_line

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; background: #fff;
       max-width: 1180px; margin: 24px auto; padding: 0 16px; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.answer { font-size: 1.15em; font-weight: 600; background: #eef4fb; border-left: 4px solid #0072B2;
          padding: 10px 14px; margin: 12px 0; }
.sim { color: #a04000; } .doubt { background: #fff4e5; border-left: 4px solid #D55E00; padding: 8px 14px; }
table { border-collapse: collapse; margin: 8px 0 12px; } th, td { border: 1px solid #d0d0d0; padding: 4px 10px;
        text-align: left; vertical-align: top; } th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; border: 1px solid #e0e0e0; }
code { background: #f4f4f4; padding: 0 3px; } .muted { color: #555; } dt { font-weight: 600; margin-top: 6px; }
"""
NUMERIC = re.compile(r"^[\d.,]+ ?(%|[KMG]iB|TB/s|GB/s|ns|B)?\b")


def inline(text: str) -> str:
    """Escaped text with the Markdown the reports use: `code` and **bold**."""
    out = html.escape(str(text))
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)


def table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{inline(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td{" class=num" if NUMERIC.match(str(c)) else ""}>{inline(c)}</td>'
                                    for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{inline(i)}</li>" for i in items) + "</ul>"


def _carveouts(result: dict) -> list[str]:
    rows = result.get("carveouts") or []
    if not rows:
        return []
    return ["<h2>The L1 under each shared-memory carveout</h2>",
            table(carveout_report.HEADER, carveout_report.table_rows(result)),
            f"<p>{inline(carveout_report.array_line(result))}</p>"]


def render_html(result: dict, png: bytes | None = None) -> str:
    """The page; ``png``: bandwidth.png's bytes, shown inline (none: no plot)."""
    dev = result["device"]
    name = inline(dev.get("name", "?"))
    parts = [f"<h1>Cache hierarchy of {name}</h1>"]
    if dev.get("simulated"):
        parts.append('<p class="sim">SIMULATED: these figures come from a model, not from hardware.</p>')
    parts += [f'<p class="answer">{inline(answer_line(result))}</p>', f'<p class="muted">{inline(run_line(result))}.</p>']
    doubts = result.get("doubts") or []
    if doubts:
        said = _list([sentence(d) for d in doubts])
        parts.append(f'<div class="doubt"><strong>This result may be incomplete:</strong>{said}'
                     f'The command line exits 2 on it unless <code>--accept-incomplete</code> is given.</div>')
    parts.append(table(NARROW_HEADER, narrow_rows(result)))
    parts += [f"<p>{inline(s)}</p>" for s in documented_sentences(result)]
    if png:
        data = base64.b64encode(png).decode("ascii")
        parts.append(f'<img alt="bandwidth and latency against working set" src="data:image/png;base64,{data}">')
    notes = note_items(result)
    if notes:
        parts.append("<h2>Notes</h2>")
        parts += [f"<h3>{inline(lv)}</h3>{_list(said)}" for lv, said in notes]
    parts += ["<h2>Warnings</h2>", _list([sentence(w) for w in result.get("warnings", [])] or ["None."])]
    parts += ["<h2>Details</h2>", table(DETAIL_HEADER, detail_rows(result))]
    parts += _carveouts(result)
    parts += ["<h2>Device</h2>", table(["fact", "value"], device_rows(result))]
    parts += ["<h2>Method</h2>", _list([m.strip().lstrip("- ") for m in method_lines(result)])]
    parts += ["<h2>Glossary</h2>", "<dl>" + "".join(f"<dt>{inline(t)}</dt><dd>{inline(x)}</dd>"
                                                     for t, x in glossary.entries(result)) + "</dl>"]
    title = html.escape(f"{dev.get('name', '?')}: cache hierarchy")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(parts) + "\n</body></html>\n")
