"""Run infrastructure every engine shares: config dataclasses as CLI, run directories, metrics
(CSV + TensorBoard), progress bar, plots, atomic checkpoints and resume,
the run-directory lock and how a run fails (faults.py: exit statuses 0/2/3/130)."""
