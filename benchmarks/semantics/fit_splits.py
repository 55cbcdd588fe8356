"""The task-trained CLIP's held-out scores under both splits, as one table written from the two fit.json files
(``rlspec semantics fit``: --split episode, the default, and --split frame).

    python -m benchmarks.semantics.fit_splits      # writes results/semantics_fit.md
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = {"episodes (default)": "semantics_fit.json", "frames, by label": "semantics_fit_frame_split.json"}


def markdown(reports: dict[str, dict]) -> str:
    """One row per split: the held-out labels, caption accuracy and the probe AUC trained and untrained."""
    rows = ["| split | held out (clear / goal / hazard) | caption accuracy | probe AUC, trained | untrained | JSON |",
            "|---|---|---|---|---|---|"]
    for (label, report), name in zip(reports.items(), RUNS.values()):
        held = report.get("held_out_labels")
        counts = " / ".join(str(held[k]) for k in ("clear", "goal", "hazard")) if held else f"{report['held_out']}"
        rows.append(f"| {label} | {counts} | {report['held_out_accuracy']:.3f} | {report['auc_trained']:.3f} | "
                    f"{report['auc_untrained']:.3f} | [{name}]({name}) |")
    return "\n".join(rows) + "\n"


def read() -> dict[str, dict]:
    return {label: json.loads((RESULTS / name).read_text()) for label, name in RUNS.items()}


if __name__ == "__main__":
    (RESULTS / "semantics_fit.md").write_text(markdown(read()))
    print(f"wrote {RESULTS / 'semantics_fit.md'}")
