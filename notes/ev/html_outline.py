"""Describe a storeprobe HTML report's structure (either tree's): python html_outline.py FILE."""

from __future__ import annotations

import re
import sys

with open(sys.argv[1], encoding="utf-8") as page:
    text = page.read()
print("sections (h2, in order):", re.findall(r"<h2[^>]*>(.*?)</h2>", text))
print('environment blocks (<dl class="environment">):', text.count('<dl class="environment"'))
print(
    "legend sentence 'fastest in its column' appears:",
    len(re.findall("fastest in its column", text)),
    "time(s)",
)
warn = re.search(r"warning: |\d+ warnings?: ", text)
first_warning = warn.start() if warn else None
print(f"offset of the first chart (<svg): {text.find('<svg')};", end=" ")
print(f"of the first warning (not the legend): {first_warning}")
print("warnings folded (<details>):", text.count("<details"))
cells = re.findall(r"<td[^>]*>([^<]*)</td>", text)
units = [c for c in cells if c in ("KiB/s", "MiB/s", "GiB/s", "Mibit/s")]
print("unit cells:", {u: units.count(u) for u in sorted(set(units))})
print(
    "crown characters (U+1F451):",
    text.count("\U0001f451"),
    "; cells ending in '*':",
    sum(c.rstrip().endswith("*") for c in cells),
    "; cells with 'fastest':",
    sum("fastest" in c for c in cells),
    "; cells with '≈':",
    sum("≈" in c for c in cells),
    "; with '~':",
    sum(c.rstrip().endswith("~") for c in cells),
)
print(
    "warnings listed ('warning: ' lines):",
    text.count("warning: "),
    "; latency table (p50 header):",
    "p50" in text,
    "; objects/s:",
    "objects/s" in text,
)
