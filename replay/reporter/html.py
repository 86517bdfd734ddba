"""A standalone HTML page for a matrix: the status table, and one chart per scenario.

Why a picture: the seeds describe growth -- a main request that stays near 889 tokens
when recorded sends 897, 1793, 2691 on another version -- and a rising line is seen
before a column of numbers is read. The page is one file with inline SVG and CSS, no
JavaScript and no build step, so it can be attached to a CI run or opened from disk.

Input is the JSON of ``replay matrix --format json`` (or ``replay merge``, or a plain
``replay run --format json``); every key is optional, because the page is most wanted
exactly when something went wrong and a cell is half-filled.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape as _html_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._untrusted import visible

if TYPE_CHECKING:
    from ..cassette import Limits

__all__ = ["fill_from_results", "render_html"]


def escape(text: str) -> str:
    """Results quote cassettes (scenario ids, errors, role names): markup-escaped, controls made visible."""
    return _html_escape(visible(str(text)))

_STATUS_CLASS = {"same": "same", "changed": "changed", "error": "error"}
_PALETTE = ("#d9480f", "#1971c2", "#2f9e44", "#7048e8", "#c2255c", "#0c8599", "#e67700", "#5c940d")
_BASELINE_COLOUR = "#adb5bd"

# Chart geometry (SVG user units).
_W, _H = 640, 280
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 96, 22, 44


@dataclass
class Series:
    """One line of a chart: the recorded baseline or one version's replay."""

    name: str
    values: list[int | None]
    colour: str
    baseline: bool = False
    same_as_recorded: bool = False


# --------------------------------------------------------------------------- input


_LARGEST = 2**53
"""The largest integer a float (the chart's scale, and JavaScript) holds exactly: a figure past it is no
token estimate (a hand-edited results file's 10**400 made the scale's division overflow)."""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _LARGEST else None


def chart_role(roles: Sequence[Any]) -> Any:
    """The agent a chart follows: ``main`` when the scenario has one, else its first agent. An
    orchestrator's delegates (SubAgents) are other conversations, not later points of its line."""
    return "main" if "main" in roles else next(iter(roles), None)


def _pairs(cell: Any) -> list[tuple[int | None, int | None]] | None:
    """(recorded, this version) estimate of each main request, from whichever key the cell has."""
    if not isinstance(cell, dict):
        return None
    raw: Any = None
    if isinstance(cell.get("main_requests"), list):
        mains = [m for m in cell["main_requests"] if isinstance(m, dict)]
        role = chart_role([m.get("role") for m in mains])
        raw = [m.get("estimate") for m in mains if m.get("role") == role]
    elif isinstance(cell.get("estimates"), list):
        raw = cell["estimates"]
    if raw is None:
        return None
    out: list[tuple[int | None, int | None]] = []
    for pair in raw:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            out.append((_int(pair[0]), _int(pair[1])))
        else:
            out.append((None, None))
    return out


def _as_matrix(doc: Any) -> dict[str, Any]:
    """Accept a ``replay run --format json`` document too: one version, "installed"."""
    if not isinstance(doc, dict):
        return {}
    scenarios = doc.get("scenarios")
    if isinstance(scenarios, dict) and "versions" not in doc and "grid" not in doc:
        if all(isinstance(c, dict) and "status" in c for c in scenarios.values()):
            return {**doc, "versions": [{"spec": "installed"}], "scenarios": {s: {"installed": c} for s, c in scenarios.items()}}
    return doc


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _versions(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [r for r in matrix.get("versions") or [] if isinstance(r, dict) and r.get("spec")]
    specs = [r["spec"] for r in rows]
    grid = _dict(matrix.get("grid"))
    for spec in [*(grid.get("versions") or []), *(s for row in _scenarios(matrix).values() for s in row)]:
        if isinstance(spec, str) and spec not in specs:
            specs.append(spec)
            rows.append({"spec": spec})
    return rows


def _scenarios(matrix: dict[str, Any]) -> dict[str, dict[str, Any]]:
    raw = matrix.get("scenarios")
    if not isinstance(raw, dict):
        return {}
    return {str(sid): row if isinstance(row, dict) else {} for sid, row in raw.items()}


def fill_from_results(matrix: dict[str, Any], limits: Limits | None = None) -> dict[str, Any]:
    """Give cells without estimates (matrix cells that came out "same") those of their result cassette.

    A "same" cell sent what was recorded, so its result cassette's estimates are the
    baseline's too. Cells whose result file is gone are left as they are. ``limits`` are the
    project's ``[tool.replay] max-*``, with which ``replay run`` wrote those files (the defaults when None).
    """
    from ..cassette import DEFAULT_LIMITS, load
    from ..errors import ReplayError

    # Each file read once: shard files are untrusted, and every cell of one could name the same heavy cassette.
    estimates: dict[Path, list[tuple[str, int, int | None]] | None] = {}
    for row in _scenarios(_as_matrix(matrix)).values():
        for cell in row.values():
            if not isinstance(cell, dict) or _pairs(cell) is not None or not isinstance(cell.get("result"), str):
                continue
            path = Path(cell["result"]).resolve()
            if path not in estimates:
                try:
                    cassette = load(path, limits or DEFAULT_LIMITS) if path.is_file() else None
                except (ReplayError, OSError):
                    cassette = None
                role = None if cassette is None else chart_role(sorted(cassette.user_roles()))
                estimates[path] = None if cassette is None else [
                    (ex.role, ex.index, ex.estimate) for ex in cassette.exchanges if ex.role == role and ex.kind != "count_tokens"
                ]
            found = estimates[path]
            if found is None:
                continue
            same = cell.get("status") == "same"
            cell["main_requests"] = [
                {"role": role, "index": index, "estimate": [estimate if same else None, estimate]}
                for role, index, estimate in found
            ]
    return matrix


def _chart_series(row: dict[str, Any], versions: Sequence[dict[str, Any]]) -> tuple[list[Series], list[str]]:
    """The baseline plus one series per version with numbers; notes for versions without."""
    pairs = {spec: _pairs(row.get(spec)) for spec in (v["spec"] for v in versions)}
    baseline: list[int | None] = []
    for p in pairs.values():
        if p and sum(a is not None for a, _ in p) > sum(v is not None for v in baseline):
            baseline = [a for a, _ in p]
    series = [Series("recorded", baseline, _BASELINE_COLOUR, baseline=True)] if any(v is not None for v in baseline) else []
    notes: list[str] = []
    for i, v in enumerate(versions):
        spec, colour = v["spec"], _PALETTE[i % len(_PALETTE)]
        cell = _dict(row.get(spec))
        status = cell.get("status", "missing")
        p = pairs[spec]
        name = _label(v)
        if p is not None and any(b is not None for _, b in p):
            values = [b for _, b in p]
            series.append(Series(name, values, colour, same_as_recorded=values == baseline))
        elif status == "same" and series:
            series.append(Series(name, list(baseline), colour, same_as_recorded=True))
        else:
            notes.append(f"{name}: {status}, no estimates")
    return series, notes


# --------------------------------------------------------------------------- drawing


def _nice_step(span: float) -> float:
    """A 1-2-2.5-5 step giving about four intervals, so tick labels are round numbers."""
    raw = max(span, 1) / 4
    mag = 10 ** math.floor(math.log10(raw))
    return float(next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw))


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"


def _spread(ys: list[float], gap: float = 13) -> list[float]:
    """Push end labels apart vertically so equal or close values stay legible."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = list(ys)
    for a, b in zip(order, order[1:]):
        if out[b] - out[a] < gap:
            out[b] = out[a] + gap
    return out


def render_chart(title: str, series: Sequence[Series]) -> str:
    """One SVG line chart: x = main request ordinal, y = token estimate, one polyline per series."""
    n = max((len(s.values) for s in series), default=0)
    peak = max((v for s in series for v in s.values if v is not None), default=0)
    step = _nice_step(peak)
    top = max(step, math.ceil(peak / step) * step)
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(i: int) -> float:
        return _LEFT + (pw / 2 if n <= 1 else pw * i / (n - 1))

    def y(v: float) -> float:
        return _TOP + ph * (1 - v / top)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {_W} {_H}" '
        f'width="{_W}" height="{_H}" role="img">',
        f"<title>{escape(title)}</title>",
        '<g class="grid">',
    ]
    ticks = int(round(top / step))
    for k in range(ticks + 1):
        v = k * step
        out.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>')
        out.append(f'<text class="y-tick" x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    out.append("</g>")
    if peak:
        out.append(
            f'<line class="peak" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(peak):.1f}" y2="{y(peak):.1f}"/>'
            f'<text class="y-peak" x="{_LEFT + 4}" y="{y(peak) - 4:.1f}">max {_fmt(peak)}</text>'
        )
    out.append('<g class="x-axis">')
    label_every = max(1, math.ceil(n / 12))
    for i in range(n):
        if i % label_every == 0 or i == n - 1:
            out.append(f'<text class="x-tick" x="{x(i):.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle">{i + 1}</text>')
    out.append(
        f'<text class="axis-label" x="{_LEFT + pw / 2:.1f}" y="{_H - 8}" text-anchor="middle">main request #</text>'
        f'<text class="axis-label" transform="translate(14 {_TOP + ph / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">token estimate</text>'
    )
    out.append("</g>")
    ends: list[tuple[float, float, Series, int]] = []
    for s in series:
        pts = [(x(i), y(v), v, i) for i, v in enumerate(s.values) if v is not None]
        if not pts:
            continue
        # The baseline is a wide pale band drawn first: a version that sent what was
        # recorded runs inside it, one that grew leaves it.
        width, opacity = (10, ' opacity="0.45"') if s.baseline else (2.5, "")
        out.append(f'<g class="series" data-series="{escape(s.name)}"{opacity}>')
        out.append(
            f'<polyline fill="none" stroke="{s.colour}" stroke-width="{width}" stroke-linejoin="round" '
            f'stroke-linecap="round" points="{" ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in pts)}"/>'
        )
        for px, py, v, i in pts:
            out.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{7 if s.baseline else 3.5}" fill="{s.colour}">'
                f"<title>{escape(s.name)}: main request {i + 1}, estimate {v}</title></circle>"
            )
        out.append("</g>")
        ends.append((pts[-1][0], pts[-1][1], s, pts[-1][2]))
    for (ex, _, s, v), ly in zip(ends, _spread([e[1] for e in ends])):
        out.append(
            f'<text class="end-label" x="{ex + 8:.1f}" y="{ly + 4:.1f}" style="fill:{"#6c757d" if s.baseline else s.colour}">'
            f"{_fmt(v)} {escape(_short(s.name))}</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


def _short(name: str) -> str:
    return name if len(name) <= 12 else name[:11] + "…"


def _label(version: dict[str, Any]) -> str:
    return str(version.get("label") or version.get("spec") or "?")


# --------------------------------------------------------------------------- page

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#212529;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#6c757d;margin:0 0 16px}
table{border-collapse:collapse;margin:8px 0 16px}
th,td{border:1px solid #dee2e6;padding:6px 10px;vertical-align:top;text-align:left}
th small{display:block;font-weight:normal;color:#6c757d}
td.same{background:#ebfbee;color:#2b8a3e}td.changed{background:#fff4e6;color:#a94b00}
td.error{background:#fff5f5;color:#c92a2a}td.missing{background:#f1f3f5;color:#868e96}
td .st{font-weight:600;text-transform:uppercase;font-size:12px}
td .d{display:block;font-size:12px;color:#495057;max-width:28em;overflow-wrap:anywhere}
a{color:inherit}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px;align-items:start}
.card{border:1px solid #dee2e6;border-radius:6px;padding:12px 14px}
.card h3{font-size:14px;margin:0 0 6px;font-family:ui-monospace,monospace}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin:4px 0 0;padding:0;list-style:none}
.legend i{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:5px}
.notes{font-size:12px;color:#868e96;margin:4px 0 0}
svg.chart{width:100%;height:auto;max-width:640px}
svg .grid line{stroke:#e9ecef}svg text{font:11px system-ui,sans-serif;fill:#6c757d}
svg .axis-label{fill:#495057}
svg .end-label,svg .y-peak{font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg .peak{stroke:#c92a2a;stroke-dasharray:2 3;opacity:.6}svg .y-peak{fill:#c92a2a}
"""


def _cell_html(cell: Any) -> str:
    if not isinstance(cell, dict):
        return '<td class="missing"><span class="st">missing</span></td>'
    status = str(cell.get("status") or "missing")
    cls = _STATUS_CLASS.get(status, "missing" if status == "missing" else "error")
    from ..matrix import cell_lines

    try:  # what the text and Markdown tables say of the cell: outcome, observations, violations too
        lines = cell_lines(cell)[1:]
    except (KeyError, TypeError, AttributeError):  # a hand-edited results file: what can be said
        lines = []
    if not lines and _pairs(cell) and status == "changed":
        lines = ["est " + ", ".join(f"{a}→{b}" for a, b in _pairs(cell) or [] if a != b)]
    detail = "; ".join(lines)
    detail = detail if len(detail) <= 400 else detail[:399] + "…"
    if status == "error" and cell.get("error"):
        err = str(cell["error"])
        detail = err if len(err) <= 160 else err[:159] + "…"
    d = f'<span class="d">{escape(detail)}</span>' if detail else ""
    return f'<td class="{cls}" title="{escape(str(cell.get("error") or status))}"><span class="st">{escape(status)}</span>{d}</td>'


def _anchor(sid: str) -> str:
    return "s-" + "".join(c if c.isalnum() else "-" for c in sid)


def render_html(matrix: dict[str, Any], *, title: str = "harness-replay matrix") -> str:
    """The whole page: header, scenario × version table, then a chart card per scenario."""
    from ..scrub import redact

    matrix = redact(_as_matrix(matrix))  # results files are untrusted input and may predate scrubbing
    versions = _versions(matrix)
    scenarios = _scenarios(matrix)
    # counted from the cells, as `replay merge` recounts them: a file's own `summary` may disagree with them
    statuses = Counter(c.get("status") for row in scenarios.values() for c in row.values() if isinstance(c, dict))
    counts = ", ".join(f"{statuses[k]} {k}" for k in ("same", "changed", "error")) if any(statuses[k] for k in _STATUS_CLASS) else ""
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{len(scenarios)} scenarios × {len(versions)} versions'
        + (f" — {escape(counts)}" if counts else "")
        + ". Charts: the harness token estimate of every main request, recorded (wide grey band) and per version.</p>",
    ]
    table = ["<table><thead><tr><th>scenario</th>"]
    for v in versions:
        extra = " · ".join(f"{k} {v[k]}" for k in ("harness", "slim") if v.get(k))
        table.append(f"<th>{escape(_label(v))}" + (f"<small>{escape(extra)}</small>" if extra else "") + "</th>")
    table.append("</tr></thead><tbody>")
    cards = ['<h2>Token estimate per main request</h2><div class="cards">']
    anchors: dict[str, str] = {}  # one per scenario: `a/b` and `a-b` read alike, and each links to its own card
    taken: set[str] = set()
    for sid in scenarios:
        anchor, n = _anchor(sid), 1
        while anchor in taken:
            n += 1
            anchor = f"{_anchor(sid)}-{n}"
        anchors[sid] = anchor
        taken.add(anchor)
    for sid, row in scenarios.items():
        table.append(f'<tr><th><a href="#{anchors[sid]}">{escape(sid)}</a></th>')
        table.extend(_cell_html(row.get(v["spec"])) for v in versions)
        table.append("</tr>")
        series, notes = _chart_series(row, versions)
        cards.append(f'<section class="card" id="{anchors[sid]}"><h3>{escape(sid)}</h3>')
        if series:
            cards.append(render_chart(f"Token estimate per main request: {sid}", series))
            cards.append('<ul class="legend">')
            for s in series:
                style = f"background:{s.colour}" + (";height:8px;opacity:.6" if s.baseline else "")
                tag = " (= recorded)" if s.same_as_recorded else ""
                cards.append(f'<li><i style="{style}"></i>{escape(s.name)}{tag}</li>')
            cards.append("</ul>")
        else:
            cards.append('<p class="notes">no main-request estimates in these results</p>')
        if notes:
            cards.append(f'<p class="notes">{escape("; ".join(notes))}</p>')
        cards.append("</section>")
    table.append("</tbody></table>")
    cards.append("</div>")
    return "\n".join([*head, *table, *cards, "</body></html>"]) + "\n"
