"""Small matplotlib plots as PNG bytes, for asset metadata and MLflow artifacts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grasp_core.tracking import figure_png


def line_plot(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]], title: str, xlabel: str, ylabel: str
) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    for label, (xs, ys) in series.items():
        ax.plot(list(xs), list(ys), marker="o", markersize=3, label=label)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend()
    png = figure_png(fig)
    plt.close(fig)
    return png


def bar_plot(values: Mapping[str, float], title: str, ylabel: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(values)), 3))
    ax.bar(list(values), list(values.values()))
    ax.set(title=title, ylabel=ylabel)
    ax.tick_params(axis="x", rotation=45)
    png = figure_png(fig)
    plt.close(fig)
    return png


def markdown_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None) -> str:
    """A GitHub markdown table; floats with one decimal (metrics are in percent)."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())

    def cell(v: object) -> str:
        if v is None:
            return "—"
        if isinstance(v, float):
            return f"{v:.1f}" if abs(v) >= 0.1 or v == 0 else f"{v:.3g}"
        return str(v)

    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    return head + "\n".join("| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows)
