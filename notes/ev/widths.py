"""Display widths of a markdown table's lines: python widths.py FILE (aligned = one width)."""

import sys

import wcwidth

with open(sys.argv[1], encoding="utf-8") as table:
    lines = [line.rstrip("\n") for line in table if line.startswith("|")]
shown = sorted({wcwidth.wcswidth(x) for x in lines})
counted = sorted({len(x) for x in lines})
print(f"table lines: {len(lines)}; display widths (wcwidth): {shown}; len() widths: {counted}")
