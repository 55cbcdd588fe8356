"""``SubprocSafeVectorEnv``: SafeVectorEnv's interface and episodes with the envs stepped in worker processes.

The ``num_envs`` envs are split into contiguous slices, one ``SafeVectorEnv`` per worker process (spawned);
``step`` sends every worker its actions before reading any answer, so the slices step in parallel. Each
slice keeps its envs' global indices (``first_index``), so the episodes (seeds), the observations and the
order of finished episodes are exactly those of one ``SafeVectorEnv(num_envs)``: the fast engine collects
the same data as the reference engine for the same actions.
"""

from __future__ import annotations

import multiprocessing as mp

import torch

from rlspec.envs.safe_vector import VectorStep


def _worker(conn, env_id: str, num_envs: int, seed: int, forced_cost: float, first_index: int) -> None:
    from rlspec.envs.safety_gym import make_vector

    torch.set_num_threads(1)
    envs = make_vector(env_id, num_envs, seed, forced_cost, first_index)
    conn.send((envs.obs_dim, envs.act_dim))
    handlers = {"reset": lambda _: envs.reset(), "step": envs.step, "pop": lambda _: envs.pop_finished(),
                "state": lambda _: envs.state_dict(), "load": lambda s: (envs.load_state_dict(s), envs.obs)[1]}
    while True:
        cmd, arg = conn.recv()
        if cmd == "close":
            envs.close()
            conn.close()
            return
        conn.send(handlers[cmd](arg))


class SubprocSafeVectorEnv:
    def __init__(self, env_id: str, num_envs: int, seed: int, workers: int, forced_cost: float = 0.0,
                 first_index: int = 0):
        if not 1 <= workers <= num_envs:
            raise ValueError(f"SubprocSafeVectorEnv: argument 'workers' must be in [1, num_envs = {num_envs}], "
                             f"got {workers}")
        self.num_envs, self.seed = num_envs, seed
        self.sizes = [num_envs // workers + (w < num_envs % workers) for w in range(workers)]  # contiguous slices
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        start = first_index
        for size in self.sizes:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, env_id, size, seed, forced_cost, start), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
            start += size
        dims = [c.recv() for c in self.conns]
        self.obs_dim, self.act_dim = dims[0]
        self._obs: torch.Tensor | None = None

    def _all(self, cmd: str, args=None) -> list:
        args = args if args is not None else [None] * len(self.conns)
        for conn, arg in zip(self.conns, args):
            conn.send((cmd, arg))
        return [conn.recv() for conn in self.conns]

    @property
    def obs(self) -> torch.Tensor:
        if self._obs is None:
            raise RuntimeError("SubprocSafeVectorEnv: call reset() or load_state_dict() first")
        return self._obs

    def reset(self) -> torch.Tensor:
        self._obs = torch.cat(self._all("reset"))
        return self._obs

    def step(self, actions: torch.Tensor) -> VectorStep:
        parts = self._all("step", list(actions.detach().split(self.sizes)))
        tensors = [f for f in VectorStep.__dataclass_fields__ if f != "frames"]  # no rendering in workers
        out = VectorStep(**{f: torch.cat([getattr(p, f) for p in parts]) for f in tensors})
        self._obs = out.obs
        return out

    def pop_finished(self) -> list[tuple]:
        """Finished episodes in SafeVectorEnv's order: by step, then by global env index."""
        return sorted((e for part in self._all("pop") for e in part), key=lambda e: (e[3], e[4]))

    def state_dict(self) -> dict:
        return {"workers": self._all("state")}

    def load_state_dict(self, state: dict) -> None:
        if len(state["workers"]) != len(self.conns):
            raise ValueError(f"SubprocSafeVectorEnv.load_state_dict: state has {len(state['workers'])} workers, "
                             f"this vector has {len(self.conns)}")
        self._obs = torch.cat(self._all("load", state["workers"]))

    def close(self) -> None:
        for conn in self.conns:
            conn.send(("close", None))
        for proc in self.procs:
            proc.join(timeout=10)
