"""Fills in missing `expect` fields of the case table from the native
harness, one case a line. Review every filled value before committing."""

import json
import sys

from cases import CASES, harness

for path in sorted(CASES.glob("*.json")):
    table = json.loads(path.read_text())
    changed = False
    for case in table["cases"]:
        if "expect" not in case or "--all" in sys.argv:
            case["expect"] = harness(table["config"], case["request"])
            changed = True
    if not changed:
        continue
    lines = ["{"]
    lines.append(f'  "about": {json.dumps(table["about"])},')
    cfg = json.dumps(table["config"], indent=2).replace("\n", "\n  ")
    lines.append(f'  "config": {cfg},')
    lines.append('  "cases": [')
    rows = [f"    {json.dumps(c, ensure_ascii=False)}" for c in table["cases"]]
    lines.append(",\n".join(rows))
    lines.append("  ]")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")
    print(f"blessed {path.name}")
