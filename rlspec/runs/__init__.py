"""Run infrastructure every engine shares: config dataclasses as CLI, run directories, metrics
(CSV + TensorBoard), progress bar, plots, atomic checkpoints and resume."""
