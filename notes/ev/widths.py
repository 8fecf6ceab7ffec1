"""Display widths of a markdown table's lines: python widths.py FILE (aligned = one width)."""
import sys

import wcwidth

lines = [line.rstrip("\n") for line in open(sys.argv[1], encoding="utf-8") if line.startswith("|")]
print(f"table lines: {len(lines)}; display widths (wcwidth): {sorted({wcwidth.wcswidth(x) for x in lines})};"
      f" len() widths: {sorted({len(x) for x in lines})}")
