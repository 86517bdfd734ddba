"""Judge `replay run --format json` on the lowest pydantic-ai-harness pyproject allows (make test-floors).

Every bundled cassette must replay there without an error, except scenarios that import a
capability the lowest harness has not got yet (a ported harness test of a newer module, or a
newer name imported inside the scenario: an error cell since a scenario that stops before its
first model request is no verdict): those cannot exist on that version, which is no fault of
the tool's floor.
"""

from __future__ import annotations

import json
import re
import sys

NEWER_CAPABILITY = re.compile(
    r"No module named 'pydantic_ai_harness\.\w+'"  # a scenario file importing a newer module
    r"|ImportError: cannot import name '\w+' from 'pydantic_ai_harness"  # or, inside its function, a newer name
)


def main(path: str) -> int:
    with open(path, encoding="utf-8") as fh:
        result = json.load(fh)
    errors = {sid: r.get("error", "") for sid, r in result["scenarios"].items() if r["status"] == "error"}
    absent = {sid for sid, error in errors.items() if NEWER_CAPABILITY.search(error)}
    print(f"lowest harness: {result['summary']}; {len(absent)} scenario(s) need a capability it has not got")
    real = {sid: error for sid, error in errors.items() if sid not in absent}
    for sid, error in real.items():
        print(f"error on the lowest harness: {sid}: {error}", file=sys.stderr)
    return 1 if real else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
