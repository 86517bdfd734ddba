"""``replay.reporter.html``: the SVG is checked structurally, and in headless Chromium when it is installed."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from replay.reporter.html import render_html

SVG = "{http://www.w3.org/2000/svg}"
WEIRD_ID = 'seed<000>/"long" & co'

# Shaped like `replay matrix --format json`: the seed 000 growth on 0.54.0, same on 0.62.0.
MATRIX: dict[str, Any] = {
    "changed": True,
    "summary": {"same": 1, "changed": 1, "error": 1},
    "versions": [
        {"spec": "0.54.0", "label": "0.54.0", "harness": "0.54.0", "slim": "2.54.0"},
        {"spec": "0.62.0", "label": "0.62.0", "harness": "0.62.0", "slim": "2.62.0"},
    ],
    "scenarios": {
        WEIRD_ID: {
            "0.54.0": {
                "status": "changed",
                "main_requests": [
                    {"role": "main", "index": i, "messages": [3, 3 + 2 * i], "estimate": pair}
                    for i, pair in enumerate([[889, 897], [887, 1793], [889, 2691]])
                ],
                "changed_requests": ["main[0-2]"],
            },
            "0.62.0": {
                "status": "same",
                "main_requests": [
                    {"role": "main", "index": i, "messages": [3, 3], "estimate": [e, e]}
                    for i, e in enumerate([889, 887, 889])
                ],
            },
        },
        "seed001/broken": {"0.54.0": {"status": "error", "error": "install failed: <no wheel>"}, "0.62.0": {}},
    },
}


def _svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", page, flags=re.S)]


def _series(svg: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-series", ""): g for g in svg.iter(f"{SVG}g") if g.get("class") == "series"}


def test_one_polyline_per_series_with_a_point_per_request() -> None:
    page = render_html(MATRIX)
    (svg,) = _svgs(page)  # the error-only scenario gets no chart
    series = _series(svg)
    assert list(series) == ["recorded", "0.54.0", "0.62.0"]
    for g in series.values():
        (line,) = g.findall(f"{SVG}polyline")
        assert len(line.get("points", "").split()) == 3
        assert len(g.findall(f"{SVG}circle")) == 3
    ys = [float(p.split(",")[1]) for p in series["0.54.0"].find(f"{SVG}polyline").get("points", "").split()]  # type: ignore[union-attr]
    assert ys[0] > ys[1] > ys[2], "the growing series rises (SVG y grows downwards)"


def test_axis_labels_include_the_peak_and_title_is_escaped() -> None:
    page = render_html(MATRIX)
    (svg,) = _svgs(page)
    texts = {t.get("class"): [] for t in svg.iter(f"{SVG}text")}
    for t in svg.iter(f"{SVG}text"):
        texts[t.get("class")].append("".join(t.itertext()).replace(",", ""))
    assert any("2691" in t for t in texts["y-peak"])
    ticks = [float(t) for t in texts["y-tick"]]
    assert ticks[0] == 0 and ticks[-1] >= 2691 > ticks[-2]
    assert [t for t in texts["x-tick"]] == ["1", "2", "3"]
    assert svg.find(f"{SVG}title").text == f"Token estimate per main request: {WEIRD_ID}"  # type: ignore[union-attr]
    assert WEIRD_ID not in page
    assert "seed&lt;000&gt;/&quot;long&quot; &amp; co" in page


def test_table_has_status_colours_and_survives_missing_keys() -> None:
    page = render_html(MATRIX)
    assert '<td class="changed"' in page and '<td class="same"' in page and '<td class="error"' in page
    assert "install failed: &lt;no wheel&gt;" in page
    assert "harness 0.54.0 · slim 2.54.0" in page
    # Cells without estimates, no versions list, junk values: still a page.
    for doc in ({}, {"scenarios": {"x": {"v": {"status": "same"}}}}, {"scenarios": {"x": None}, "versions": [1]}):
        assert render_html(doc).startswith("<!DOCTYPE html>")  # type: ignore[arg-type]


def test_same_cell_without_numbers_follows_the_baseline() -> None:
    """Real matrix cells carry estimates only when changed; "same" means the baseline's numbers."""
    doc = json.loads(json.dumps(MATRIX))
    sid = WEIRD_ID
    doc["scenarios"][sid]["0.54.0"] = {"status": "changed", "estimates": [[889, 897], [887, 1793], [889, 2691]]}
    doc["scenarios"][sid]["0.62.0"] = {"status": "same"}
    (svg,) = _svgs(render_html(doc))
    series = _series(svg)
    pts = {name: g.find(f"{SVG}polyline").get("points") for name, g in series.items()}  # type: ignore[union-attr]
    assert pts["0.62.0"] == pts["recorded"] != pts["0.54.0"]


def test_a_chart_follows_main_not_its_sub_agents() -> None:
    """An orchestrator's SubAgents delegates are other conversations: not points after main's last request."""
    doc = json.loads(json.dumps(MATRIX))
    delegates = [{"role": r, "index": 0, "messages": [1, 1], "estimate": [6, 6]} for r in ("researcher", "writer")]
    for cell in doc["scenarios"][WEIRD_ID].values():
        cell["main_requests"] = [*delegates, *cell["main_requests"]]  # the differ's order: roles sorted
    (svg,) = _svgs(render_html(doc))
    for name, g in _series(svg).items():
        points = g.find(f"{SVG}polyline").get("points").split()  # type: ignore[union-attr]
        assert len(points) == 3, (name, points)


def test_run_json_renders_as_one_version() -> None:
    run = {"scenarios": {"a/b": {"status": "same", "main_requests": [{"estimate": [5, 5]}, {"estimate": [9, 9]}]}}}
    (svg,) = _svgs(render_html(run))
    assert list(_series(svg)) == ["recorded", "installed"]


def test_html_command_writes_the_page(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = tmp_path / "results.json"
    src.write_text(json.dumps(MATRIX))
    out = tmp_path / "out" / "report.html"
    res = cli("html", str(src), "--out", str(out))
    assert res.code == 0, res.err
    assert res.out.strip() == f"wrote {out} (2 scenarios)"
    assert len(_svgs(out.read_text())) == 1
    bad = cli("html", str(tmp_path / "missing.json"), "--out", str(out))
    assert bad.code == 2 and "cannot read" in bad.err
    for other in ({}, {"report": 1, "versions": []}):  # wrote "(0 scenarios)" and exited 0
        src.write_text(json.dumps(other))
        bad = cli("html", str(src), "--out", str(tmp_path / "z.html"))
        assert bad.code == 2 and "not the JSON of `replay matrix`" in bad.err and not (tmp_path / "z.html").exists()


# --------------------------------------------------------------------------- headless Chromium


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _png_pixels(path: Path) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) without Pillow."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        head, idat = (body, idat) if kind == b"IHDR" else (head, idat + body if kind == b"IDAT" else idat)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", head)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, pixels = bytearray(stride), []
    for row in range(height):
        f, line = raw[row * (stride + 1)], bytearray(raw[row * (stride + 1) + 1 : (row + 1) * (stride + 1)])
        for i in range(stride):
            a, b, c = line[i - bpp] if i >= bpp else 0, prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        pixels += [tuple(line[i : i + 3]) for i in range(0, stride, bpp)]  # type: ignore[misc]
        prev = line
    return width, height, pixels


def _near(px: tuple[int, int, int], rgb: tuple[int, int, int], tolerance: int = 40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(px, rgb))


@pytest.mark.skipif(_chromium() is None, reason="headless screenshot needs chromium (apt-get install chromium)")
def test_screenshot_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(MATRIX))
    shot = tmp_path / "report.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                _chromium() or "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                f"--screenshot={shot}",
                "--window-size=1200,900",
                page.as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert shot.is_file(), "chromium wrote no screenshot"
    width, height, pixels = _png_pixels(shot)
    assert (width, height) == (1200, 900)
    count = Counter(pixels)
    # The status colours of the table and the lines of the chart were painted.
    assert sum(n for px, n in count.items() if _near(px, (0xD9, 0x48, 0x0F))) > 200, "the 0.54.0 line"
    assert sum(n for px, n in count.items() if _near(px, (0x19, 0x71, 0xC2))) > 100, "the 0.62.0 line"
    assert sum(n for px, n in count.items() if _near(px, (0xFF, 0xF4, 0xE6), 4)) > 2000, "a changed cell"
    assert sum(n for px, n in count.items() if _near(px, (0xEB, 0xFB, 0xEE), 4)) > 2000, "a same cell"


def test_a_cell_says_why_it_changed_as_the_text_table_does() -> None:
    """A cell whose only change was an observation, the outcome or a violation read `changed / est `."""
    from html import escape

    from replay import matrix as mx
    from replay.reporter.html import _cell_html

    cell = {"status": "changed", "changed_requests": [], "estimate_deltas": "",
            "outcome": [{"status": "error", "error": {"type": "x.UnexpectedModelBehavior", "message": "m"}},
                        {"status": "ok", "output": "done"}],
            "observation_changes": [{"path": "observations.turns", "old": 2, "new": 4}], "observations": ["turns"],
            "violations": [{"status": "new", "invariant": "empty_summary", "role": "main", "index": 1, "message": "blank"}]}
    html = _cell_html(cell)
    for line in mx.cell_lines(cell)[1:]:
        assert escape(line) in html, line
    assert "est </span>" not in html and "observation turns 2→4" in html and "empty_summary" in html


def test_cells_naming_one_result_cassette_read_it_once(monkeypatch: Any) -> None:
    """A shard file is untrusted: every cell of it could name the same heavy cassette, read again for each."""
    from replay import cassette as cas
    from replay.reporter.html import fill_from_results

    path = str(ROOT / "cassettes" / "seed000" / "long.cassette")
    reads: list[Path] = []
    real = cas.load

    def load(p: Path, *a: Any, **k: Any) -> Any:
        reads.append(p)
        return real(p, *a, **k)

    monkeypatch.setattr(cas, "load", load)
    doc = {"versions": [{"spec": f"0.{n}.0"} for n in range(50)],
           "scenarios": {f"s/{i}": {f"0.{n}.0": {"status": "same" if n % 2 else "changed", "result": path} for n in range(50)}
                         for i in range(20)}}
    fill_from_results(doc)
    assert len(reads) == 1
    same, changed = doc["scenarios"]["s/3"]["0.1.0"], doc["scenarios"]["s/3"]["0.2.0"]
    assert [r["estimate"] for r in same["main_requests"]] == [[889, 889], [887, 887], [889, 889]]
    assert [r["estimate"] for r in changed["main_requests"]] == [[None, 889], [None, 887], [None, 889]]
    assert same["main_requests"] is not doc["scenarios"]["s/4"]["0.1.0"]["main_requests"]  # each cell its own list


def test_an_estimate_too_large_for_a_float_is_no_traceback() -> None:
    """A hand-edited results file with an estimate of 10**400: `replay html` crashed (OverflowError in the
    chart's scale); the table still says the cell, the chart leaves the figure out."""
    doc = json.loads(json.dumps(MATRIX))
    doc["scenarios"][WEIRD_ID]["0.54.0"]["main_requests"][1]["estimate"] = [887, 10**400]
    page = render_html(doc)
    (svg,) = _svgs(page)
    pts = {name: g.find(f"{SVG}polyline").get("points") for name, g in _series(svg).items()}  # type: ignore[union-attr]
    assert len(pts["0.54.0"].split()) == 2 and len(pts["recorded"].split()) == 3  # type: ignore[union-attr]


def test_two_ids_that_read_alike_link_to_their_own_cards() -> None:
    """`a/b` and `a-b` both had the anchor `s-a-b`: the second row's link opened the first scenario's chart."""
    doc = {"scenarios": {"a/b": {"v": {"status": "same"}}, "a-b": {"v": {"status": "same"}}, "a-b-2": {"v": {"status": "same"}}}}
    page = render_html(doc)
    links = re.findall(r'<a href="#([^"]+)">([^<]+)</a>', page)
    cards = dict((sid, anchor) for anchor, sid in re.findall(r'<section class="card" id="([^"]+)"><h3>([^<]+)</h3>', page))
    assert len({anchor for anchor, _ in links}) == 3
    assert all(cards[sid] == anchor for anchor, sid in links)


def test_the_page_counts_its_cells_as_merge_does_not_the_files_summary() -> None:
    """A results file whose `summary` disagrees with its cells (hand-edited, or edited by a shard job):
    `replay merge` recounts (84 same, 25 changed, 1 error), the page said the file's `110 same, 0 changed`."""
    doc = json.loads(json.dumps(MATRIX))
    doc["summary"] = {"same": 3, "changed": 0, "error": 0}
    page = render_html(doc)
    assert "1 same, 1 changed, 1 error" in page and "3 same" not in page
