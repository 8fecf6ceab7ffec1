"""Run the storeprobe CLI in-process and describe every figure it saves (either tree).

python notes/ev/figure.py report FILE --plot chart.png   → the CLI's own output, then per
saved figure: its panels (axes), the bars in each, the tick labels of the value axis, and
the legend's entries.
"""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

_save = Figure.savefig


def _describe(self: Figure, *args: object, **kwargs: object) -> None:
    self.canvas.draw()
    axes = [ax for ax in self.axes if ax.get_visible()]
    print(f"[figure] {len(axes)} panel(s)")
    for ax in axes:
        bars = [
            p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() and p.get_width()
        ]
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        xt = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        title, unit = ax.get_title(), ax.get_ylabel()
        print(
            f"  panel {title!r}: {len(bars)} bars; y axis {unit!r}, ticks {ticks[:8]};",
            f"x ticks {xt[:8]}",
        )
    for legend in [*self.legends, *(ax.get_legend() for ax in self.axes if ax.get_legend())]:
        entries = [t.get_text() for t in legend.get_texts()]
        print(f"  legend {legend.get_title().get_text()!r}: {entries}")
    _save(self, *args, **kwargs)


Figure.savefig = _describe  # type: ignore[method-assign]

if sys.argv[1] == "plot_backup":  # the library call: plot_backup(ResultSet.load(FILE))
    from storeprobe import ResultSet
    from storeprobe.plot import plot_backup

    plot_backup(ResultSet.load(sys.argv[2])).savefig("plot_backup.png")
else:
    from storeprobe.cli import main

    sys.exit(main(sys.argv[1:]))
