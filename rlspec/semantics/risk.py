"""The auxiliary risk head (PPOLagSem design §4.0.4, §5.2, §9, §25.3, §25.15, §29): a float32 MLP q_φ(e) on
detached frame embeddings, trained after each PPO update with SmoothL1 against the truncated, episode-
masked discounted cost g_t of the ``risk_target`` contract.

RiskBuffer keeps the last ``window_size`` vectorized steps of the *per-step* cost and done streams
(cost [W, B], done [W, B]) and the embeddings captured in them (one row per captured env). Targets are
computed on the per-step stream and read at the captured steps (contract ``risk_target``, "Reading at
captured steps"): with capture_interval k > 1 the costs between captures still count. The newest steps'
targets see fewer than H future costs (no bootstrap, PPOLagSem design §13).

RiskTrainer.update (§5.2, §18.5):
    N < risk_min_samples                      → skipped (status too_few_samples), the head untouched
    risk_update_iters times: a batch of risk_batch_size rows drawn without replacement from the
    trainer's own generator (0 or ≥ N: all N rows), one Adam step (risk_lr) on SmoothL1(q_φ(e), g)
    then Risk/Corr = Pearson(q_φ(e), g) over all N rows, in float64 (0 when either side is constant).
With ``risk_holdout_fraction`` > 0 the captures whose step hashes below it (``held_out``) are left out of N and
training, and the head's calibration on them is logged after training (``calibration``: Risk/ECE, the
reliability curve, Risk/HeldOut/*; NaN while none is held out or the update was skipped).
NaN/Inf guard (§9): non-finite costs are recorded as 0, non-finite embedding rows are left out, a
non-finite loss skips its step; each event adds 1 to Risk/NanEvents (never silent).
Nothing here touches the global RNG: initialization and sampling use the trainer's ``torch.Generator``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from rlspec.contracts.risk_target import at_captures
from rlspec.fast.risk_target import risk_target as fast_risk_target
from rlspec.semantics.config import RELIABILITY_BINS, SemanticConfig
from rlspec.semantics.telemetry import CALIBRATION_KEYS

STATUS = {"ok": 0, "too_few_samples": 1, "nonfinite_loss": 2, "semantics_unavailable": 3}


class RiskBuffer:
    def __init__(self, num_envs: int, window_size: int, device: torch.device, risk_target: Callable = fast_risk_target):
        """``risk_target``: contract risk_target's implementation (the run's kit; default the fast twin)."""
        self.num_envs, self.window, self.risk_target = num_envs, window_size, risk_target
        self.cost = torch.zeros(window_size, num_envs)  # [W, B] ring of per-step costs (CPU, float32)
        self.done = torch.zeros(window_size, num_envs, dtype=torch.bool)  # [W, B]
        self.steps = 0  # vectorized steps recorded so far
        self.captures: deque[tuple[int, torch.Tensor, torch.Tensor]] = deque()  # (step, rows [n], e [n, D])
        self.device = device
        self.nan_events = 0

    def record_step(self, cost: torch.Tensor, done: torch.Tensor) -> int:
        """Append one vectorized step (cost [B], done [B] bool); returns its step index."""
        cost = cost.detach().float().cpu()
        bad = ~torch.isfinite(cost)
        if bool(bad.any()):
            self.nan_events += int(bad.sum())
            cost = torch.where(bad, torch.zeros_like(cost), cost)
        step, slot = self.steps, self.steps % self.window
        self.cost[slot], self.done[slot] = cost, done.detach().cpu()
        self.steps += 1
        while self.captures and self.captures[0][0] < self.steps - self.window:
            self.captures.popleft()
        return step

    def record_capture(self, step: int, rows: torch.Tensor, e: torch.Tensor) -> None:
        """Embeddings e [n, D] (detached, host) of envs ``rows`` [n] captured at vectorized step ``step``."""
        self.captures.append((step, rows.cpu(), e.detach().to(self.device)))

    def held_out_rows(self, fraction: float) -> torch.Tensor:
        """[N] bool: the rows of the captures ``held_out`` at ``fraction``, in the order of ``dataset``."""
        flags = [torch.full((len(rows),), held_out(step, fraction)) for step, rows, _ in self.captures]
        return torch.cat(flags) if flags else torch.zeros(0, dtype=torch.bool)

    def embeddings(self) -> torch.Tensor:  # [N, D]
        return torch.cat([e for _, _, e in self.captures]) if self.captures else torch.zeros(0, 0)

    def dataset(self, gamma: float, horizon: int, mask_episodes: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(e [N, D], g [N]): every buffered embedding with g_t of its env and step (float32)."""
        if not self.captures:
            return torch.zeros(0, 0), torch.zeros(0)
        L = min(self.steps, self.window)
        start = self.steps - L
        order = torch.arange(start, self.steps) % self.window  # [L] ring slots in time order
        done = self.done[order] if mask_episodes else torch.zeros(L, self.num_envs, dtype=torch.bool)
        g = self.risk_target(self.cost[order], done, gamma, horizon)  # [L, B]
        at = at_captures(g, torch.tensor([step - start for step, _, _ in self.captures]))  # [J, B]
        return self.embeddings(), torch.cat([at[j, rows] for j, (_, rows, _) in enumerate(self.captures)])

    def sizes(self) -> dict[str, float]:
        L = min(self.steps, self.window)
        return {"Risk/Buf/Embeddings": float(sum(len(r) for _, r, _ in self.captures)),
                "Risk/Buf/Costs": float(L * self.num_envs),
                "Risk/Buf/Dones": float(self.done.sum())}  # slots not yet written hold False


class RiskHead(nn.Module):
    """q_φ: [N, D] → [N], float32, two ReLU hidden layers; weights ~ N(0, 1/fan_in) from ``generator``."""

    def __init__(self, dim: int, hidden: int, generator: torch.Generator):
        super().__init__()
        sizes = [dim, hidden, hidden, 1]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes, sizes[1:]):
            linear = nn.utils.skip_init(nn.Linear, fan_in, fan_out, dtype=torch.float32)  # no global RNG draw
            with torch.no_grad():
                linear.weight.copy_(torch.randn(fan_out, fan_in, generator=generator) / math.sqrt(fan_in))
                linear.bias.zero_()
            layers += [linear, nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, e: torch.Tensor) -> torch.Tensor:  # [N, D] -> [N]
        return self.net(e.float())[:, 0]


def held_out(step: int, fraction: float) -> bool:
    """Whether the capture at vectorized step ``step`` is held out: Knuth's multiplicative hash of the step as a
    fraction of 2**32 below ``fraction`` (about that share of captures, the same ones on every run and resume,
    whatever the capture interval; no random draw)."""
    return (step * 2654435761) % 2**32 < fraction * 2**32


def calibration(pred: torch.Tensor, g: torch.Tensor, bins: int = RELIABILITY_BINS) -> dict[str, float]:
    """The risk head's calibration on held-out rows, pred and g [N]: the rows sorted by prediction and cut into
    ``bins`` equal-count bins; per bin the mean prediction p̄_b and mean target ḡ_b (the reliability curve: a
    calibrated head has p̄_b = ḡ_b) and ECE = Σ_b (n_b / N)·|p̄_b − ḡ_b| (Guo et al. 2017's expected calibration
    error, the bin's mean target in place of its accuracy for a regression head; the PPOLagSem design §5.2, §12). Empty bins
    (N < bins) read NaN; N = 0: everything NaN."""
    p, t = pred.double().cpu(), g.double().cpu()
    chunks = torch.tensor_split(torch.argsort(p), bins)
    means = [(float(p[c].mean()), float(t[c].mean())) if len(c) else (math.nan, math.nan) for c in chunks]
    n = len(p)
    ece = sum(len(c) / n * abs(pm - tm) for c, (pm, tm) in zip(chunks, means) if len(c)) if n else math.nan
    values = [ece, pearson(p, t) if n >= 2 else math.nan, float(n),
              *(pm for pm, _ in means), *(tm for _, tm in means)]
    return dict(zip(CALIBRATION_KEYS, values))


def pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson correlation in float64; 0 when either side has no variance."""
    dx, dy = x.double() - x.double().mean(), y.double() - y.double().mean()
    denom = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return float((dx * dy).sum()) / denom if denom > 0 else 0.0


class RiskTrainer:
    def __init__(self, cfg: SemanticConfig, dim: int, device: torch.device, seed: int):
        self.cfg, self.device = cfg, device
        self.generator = torch.Generator().manual_seed(seed)
        self.head = RiskHead(dim, cfg.risk_hidden, self.generator).to(device)
        self.optimizer = torch.optim.Adam(self.head.parameters(), lr=cfg.risk_lr)
        self.nan_events = 0
        self.corr = 0.0  # Risk/Corr of the last update that trained (0 before any)

    @torch.no_grad()
    def predict(self, e: torch.Tensor) -> torch.Tensor:  # [N, D] -> [N] float32 on the head's device
        return self.head(e.to(self.device))

    def update(self, buffer: RiskBuffer) -> dict[str, float]:
        """One round of risk training on the buffer (after the PPO update, §25.15); returns Risk/* metrics."""
        cfg = self.cfg
        e, g = buffer.dataset(cfg.discount, cfg.risk_horizon, cfg.risk_episode_mask_enable)
        e, g = e.to(self.device).float(), g.to(self.device)
        ok = torch.isfinite(e).all(-1) & torch.isfinite(g) if e.numel() else torch.zeros(0, dtype=torch.bool)
        self.nan_events += int((~ok).sum())
        held = buffer.held_out_rows(cfg.risk_holdout_fraction)[ok.cpu()].to(self.device)
        (e_out, g_out), e, g = (e[ok][held], g[ok][held]), e[ok][~held], g[ok][~held]
        n = g.shape[0]
        if n < cfg.risk_min_samples:
            return self.metrics(buffer, "too_few_samples", f"{n} < risk_min_samples={cfg.risk_min_samples}")
        size = n if cfg.risk_batch_size == 0 else min(cfg.risk_batch_size, n)
        losses, used = [], 0
        for _ in range(cfg.risk_update_iters):
            idx = torch.randperm(n, generator=self.generator)[:size].to(self.device)  # without replacement
            loss = F.smooth_l1_loss(self.head(e[idx]), g[idx])
            if not torch.isfinite(loss):
                self.nan_events += 1
                continue
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            losses.append(float(loss.detach()))
            used += size
        if not losses:
            return self.metrics(buffer, "nonfinite_loss", f"all {cfg.risk_update_iters} losses non-finite")
        pred = self.predict(e)  # [n]
        self.corr = pearson(pred, g)
        return self.metrics(buffer, "ok", "ok", loss=sum(losses) / len(losses), pred_mean=float(pred.mean()),
                            target_mean=float(g.mean()), corr=self.corr, samples=used,
                            calibrated=calibration(self.predict(e_out), g_out))

    def metrics(self, buffer: RiskBuffer, status: str, message: str, calibrated: dict | None = None,
                **values: float) -> dict[str, float]:
        return risk_metrics(status, message, lr=self.optimizer.param_groups[0]["lr"],
                            nan_events=self.nan_events + buffer.nan_events, sizes=buffer.sizes(),
                            holdout=self.cfg.risk_holdout_fraction > 0, calibrated=calibrated, **values)


BUFFER_KEYS = ("Risk/Buf/Embeddings", "Risk/Buf/Costs", "Risk/Buf/Dones")


def risk_metrics(status: str, message: str, *, lr: float, nan_events: int, sizes: dict | None = None,
                 loss=0.0, pred_mean=0.0, target_mean=0.0, corr=0.0, samples=0, holdout: bool = False,
                 calibrated: dict | None = None) -> dict[str, float]:
    """Every Risk/* key of one update (§7, §15.5), the same set whether the update ran or was skipped
    (then the loss and statistics read 0 and Risk/TrainStatusCode says why, as the PPOLagSem design logs it); with
    ``holdout`` the calibration keys too (NaN unless ``calibrated`` gives them)."""
    calibration_keys = (calibrated or dict.fromkeys(CALIBRATION_KEYS, math.nan)) if holdout else {}
    return {**calibration_keys, "Risk/Loss": float(loss), "Risk/PredMean": float(pred_mean),
            "Risk/TargetMean": float(target_mean), "Risk/Corr": float(corr), "Risk/TrainSamples": float(samples),
            "Risk/LR": float(lr), "Risk/NanEvents": float(nan_events), "Risk/TrainStatusCode": float(STATUS[status]),
            "Risk/TrainStatusMsgLen": float(len(message)), **(sizes or dict.fromkeys(BUFFER_KEYS, 0.0))}
