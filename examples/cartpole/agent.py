"""Tiny numpy agents on gymnasium's CartPole, logging the way SLM-Lab does.

Three ways to learn a linear policy over the 4 observations plus a bias:

- ``cem``: the cross-entropy method. Sample a population of weight vectors
  from a Gaussian, play one episode with each, refit the Gaussian to the best
  quarter (plus a little decaying extra noise so it does not collapse early).
- ``random_search``: hill climbing. Perturb the best weights found so far; keep
  the perturbation if it does at least as well, and shrink the noise on
  success, grow it on failure.
- ``reinforce``: REINFORCE with a linear softmax policy over the two actions
  (for two actions, a logistic policy on the same features), normalised
  discounted returns as the weights of the log-likelihood gradient.

The program does not know about benchlab. Like SLM-Lab it prints, every
``--log-every`` frames and once at the end, a line such as::

    [INFO] trial_metrics: frame:1.00e+04 | total_reward_ma:187.35 | total_reward:200.00 | fps:41234

with ANSI colour codes around ``[INFO]`` and ``trial_metrics:``, as a
terminal logger would write them; benchlab reads the numbers back with the
regular expressions in benchlab.yaml, after stripping the colours.
``total_reward`` is the return of the last finished episode, ``total_reward_ma``
the mean over the last ``--ma-window`` finished episodes, ``frame`` the number
of environment steps so far, ``fps`` steps per second of wall time.

Everything random flows from ``--seed`` (numpy's generator and the
environment's reset), so a seed's lines are the same on every run, ``fps``
aside::

    python agent.py --algo cem --seed 0 --max-steps 500 --max-frame 50000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import NoReturn

import gymnasium as gym
import numpy as np

GREEN, BOLD, RESET = "\x1b[32m", "\x1b[1m", "\x1b[0m"
N_FEATURES = 5  # cart position, cart velocity, pole angle, pole angular velocity, bias

Policy = Callable[[np.ndarray], int]


class BudgetSpent(Exception):
    """The frame budget ran out in the middle of an episode."""


class Trainer:
    """Owns the environment, counts frames, keeps episode returns and prints the metric lines."""

    def __init__(self, env: gym.Env, seed: int, max_frame: int, log_every: int, ma_window: int,
                 color: bool):
        self.env = env
        self.max_frame = max_frame
        self.log_every = log_every
        self.returns: deque[float] = deque(maxlen=ma_window)
        self.frame = 0
        self.last_logged = -1
        self.color = color
        self.start = time.perf_counter()
        self._seed: int | None = seed  # the first reset seeds the environment's generator

    def info(self, message: str) -> None:
        prefix = f"{GREEN}[INFO]{RESET}" if self.color else "[INFO]"
        print(f"{prefix} {message}", flush=True)

    def episode(self, policy: Policy, record: list[tuple[np.ndarray, int]] | None = None) -> float:
        """Play one episode with ``policy`` (features (5,) -> action); return its total reward.

        ``record``, when given, receives the (features, action) of every step.
        Raises ``BudgetSpent`` when the frame budget ends first.
        """
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None
        total, done = 0.0, False
        while not done:
            if self.frame >= self.max_frame:
                raise BudgetSpent
            features = np.append(obs.astype(np.float64), 1.0)
            action = policy(features)
            if record is not None:
                record.append((features, action))
            obs, reward, terminated, truncated, _ = self.env.step(action)
            total += float(reward)
            done = terminated or truncated
            self.frame += 1
            if done:
                self.returns.append(total)
            if self.frame % self.log_every == 0:
                self.log_metrics()
        return total

    def log_metrics(self) -> None:
        if not self.returns or self.frame == self.last_logged:
            return
        self.last_logged = self.frame
        fps = self.frame / max(time.perf_counter() - self.start, 1e-9)
        key = f"{BOLD}trial_metrics:{RESET}" if self.color else "trial_metrics:"
        self.info(f"{key} frame:{self.frame:.2e} | total_reward_ma:{np.mean(self.returns):.2f} | "
                  f"total_reward:{self.returns[-1]:.2f} | fps:{fps:.0f}")


def linear(theta: np.ndarray) -> Policy:
    """The deterministic linear policy: push right when features @ theta > 0."""
    return lambda features: int(features @ theta > 0.0)


def cem(trainer: Trainer, rng: np.random.Generator, population: int = 16,
        elite_frac: float = 0.25, extra_noise: float = 0.5) -> NoReturn:
    """Cross-entropy method over linear weights (5,): ``population`` episodes per generation."""
    mean, std = np.zeros(N_FEATURES), np.ones(N_FEATURES)
    n_elite = max(2, int(population * elite_frac))
    generation = 0
    while True:
        candidates = mean + std * rng.standard_normal((population, N_FEATURES))
        scores = np.array([trainer.episode(linear(theta)) for theta in candidates])
        elite = candidates[np.argsort(-scores, kind="stable")[:n_elite]]
        generation += 1
        mean = elite.mean(axis=0)
        # The decaying extra noise keeps the search from collapsing onto the first lucky elite.
        std = elite.std(axis=0) + extra_noise / generation


def random_search(trainer: Trainer, rng: np.random.Generator, noise: float = 1.0) -> NoReturn:
    """Hill climbing over linear weights (5,), one episode per candidate, adaptive noise."""
    best = rng.standard_normal(N_FEATURES)
    best_score = trainer.episode(linear(best))
    while True:
        candidate = best + noise * rng.standard_normal(N_FEATURES)
        score = trainer.episode(linear(candidate))
        if score >= best_score:
            best, best_score = candidate, score
            noise = max(noise / 2.0, 1e-3)
        else:
            noise = min(noise * 2.0, 2.0)


def reinforce(trainer: Trainer, rng: np.random.Generator, lr: float = 0.01,
              gamma: float = 0.99) -> NoReturn:
    """REINFORCE with a stochastic policy, one gradient step per episode."""
    theta = np.zeros(N_FEATURES)

    def policy(features: np.ndarray) -> int:
        p_right = 1.0 / (1.0 + np.exp(-(features @ theta)))
        return int(rng.random() < p_right)

    while True:
        steps: list[tuple[np.ndarray, int]] = []
        trainer.episode(policy, record=steps)
        x = np.array([f for f, _ in steps])  # (T, 5)
        a = np.array([act for _, act in steps], dtype=np.float64)  # (T,)
        rewards_to_go = np.empty(len(steps))
        running = 0.0
        for t in range(len(steps) - 1, -1, -1):  # every step of CartPole pays 1
            running = 1.0 + gamma * running
            rewards_to_go[t] = running
        advantage = (rewards_to_go - rewards_to_go.mean()) / (rewards_to_go.std() + 1e-8)
        p_right = 1.0 / (1.0 + np.exp(-(x @ theta)))
        # d/dtheta log pi(a|s) for a logistic policy is (a - p_right) * s.
        theta = theta + lr * ((a - p_right) * advantage) @ x


Algorithm = Callable[[Trainer, np.random.Generator], NoReturn]
# Each trains until the frame budget runs out, which ends it with BudgetSpent.
ALGOS: dict[str, Algorithm] = {"cem": cem, "random_search": random_search, "reinforce": reinforce}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", choices=sorted(ALGOS), required=True)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--max-steps", type=int, default=None,
                   help="episode length cap (default: the environment's own, 500)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-frame", type=float, default=5e4, help="environment steps in all")
    p.add_argument("--log-every", type=int, default=5000, help="frames between metric lines")
    p.add_argument("--ma-window", type=int, default=20, help="episodes in total_reward_ma")
    p.add_argument("--color", choices=("always", "never"), default="always")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = gym.make(args.env, max_episode_steps=args.max_steps)
    rng = np.random.default_rng(args.seed)
    trainer = Trainer(env, args.seed, int(args.max_frame), args.log_every, args.ma_window,
                      color=args.color == "always")
    cap = env.spec.max_episode_steps if env.spec is not None else None
    trainer.info(f"{args.algo} on {args.env} (episodes capped at {cap} steps), "
                 f"seed {args.seed}, {int(args.max_frame)} frames")
    try:
        ALGOS[args.algo](trainer, rng)
    except BudgetSpent:
        pass
    trainer.log_metrics()
    if not trainer.returns:
        print("no episode finished within the frame budget", file=sys.stderr)
        return 1
    trainer.info(f"done: {trainer.frame} frames, {len(trainer.returns)} episodes in the last "
                 f"window, final total_reward_ma {np.mean(trainer.returns):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
