"""Classify the cells of a matrix run of ``scenarios/harness_tests`` against the bundled recordings.

A changed cell is *noise only* when every field change is one the tool should have hidden
(``NOISE`` below: schema growth seen so far) and nothing else moved (no aligned-message
entries, estimates, outcome, observations or call counts); otherwise it is a *real* change,
listed with the kinds of path that changed so a person can name it (the README's R1-R4).

    replay matrix --harness 0.52.0,...,0.62.0 harness_tests/ --jobs 2 --format json --out .replay/ht > ht.json
    python bench/false_positives.py ht.json .replay/ht
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NOISE = re.compile(r"instruction_parts\[\d+\]\.on_change$")


def classify(doc: dict, out: Path) -> dict[str, dict[str, tuple[str, str]]]:
    from replay.cassette import load
    from replay.differ import diff

    rows: dict[str, dict[str, tuple[str, str]]] = {}
    for sid, row in doc["scenarios"].items():
        rows[sid] = {}
        for v, cell in row.items():
            if cell["status"] == "same":
                rows[sid][v] = ("same", "")
                continue
            if cell["status"] == "error":
                m = re.search(r"No module named '([^']+)'", cell.get("error", ""))
                rows[sid][v] = ("absent" if m else "error", m.group(1) if m else cell.get("error", "")[:80])
                continue
            d = diff(load(ROOT / "cassettes" / f"{sid}.cassette"), load(out / v / f"{sid}.cassette"))
            real = [c.path for r in d.requests for c in r.changes if not NOISE.search(c.path)]
            real += [f"{e.kind}:{e.path}" for r in d.requests for e in r.entries]
            moved = d.outcome or d.observations or any(
                r.status != "changed" or r.estimate_a != r.estimate_b for r in d.requests
            )
            kinds = sorted({re.sub(r"\[\d+(→\d+)?\]", "[]", p.split(".", 1)[-1]) for p in real})
            rows[sid][v] = ("real", "; ".join(kinds)) if real or moved else ("noise", "")
    return rows


def main() -> int:
    doc = json.loads(Path(sys.argv[1]).read_text())
    rows = classify(doc, Path(sys.argv[2]))
    versions = doc["grid"]["versions"]
    counts: dict[str, int] = {}
    for sid, row in rows.items():
        marks = " ".join(f"{v}:{row[v][0]}" for v in versions if row[v][0] != "same")
        print(f"{sid}: {marks or 'same everywhere'}")
        for what in sorted({row[v][1] for v in versions if row[v][0] == "real"}):
            print(f"    real: {what}")
        for v in versions:
            counts[row[v][0]] = counts.get(row[v][0], 0) + 1
    print(json.dumps(counts))
    return 1 if counts.get("noise") else 0


if __name__ == "__main__":
    sys.exit(main())
