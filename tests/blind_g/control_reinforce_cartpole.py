"""Healthy control: REINFORCE on a cart-pole simulated in Python, in the style of
pytorch/examples' `reinforce.py` (one optimizer step per episode).

The trap: most of each episode is action selection: the policy's forward on one state,
`torch.distributions.Categorical` (with its default argument checks) and `sample()`, once per
simulated time step, plus the simulator's few lines of arithmetic. That is the model's own
work, not overhead: the loss is built from these log-probabilities, so it cannot be run every
N steps or moved to another thread without changing what is learned. Nothing here is a
mistake; an informational note that `Categorical(..., validate_args=False)` skips the checks
would be welcome, a warning would not.

`--fixed` is accepted and changes nothing.
"""

from __future__ import annotations

import argparse
import math
import os

import torch
from torch import nn
from torch.distributions import Categorical

EPISODES = int(os.environ.get("STEPS", "80"))


class CartPole:
    """The classic cart-pole dynamics (Barto, Sutton and Anderson, 1983), Euler steps."""

    def __init__(self, seed: int) -> None:
        self.g = torch.Generator().manual_seed(seed)

    def reset(self) -> list[float]:
        self.s = (torch.rand(4, generator=self.g) * 0.1 - 0.05).tolist()
        return self.s

    def step(self, action: int) -> tuple[list[float], float, bool]:
        x, x_dot, th, th_dot = self.s
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(th), math.sin(th)
        temp = (force + 0.05 * th_dot**2 * sin) / 1.1
        th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * th_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        th, th_dot = th + 0.02 * th_dot, th_dot + 0.02 * th_acc
        self.s = [x, x_dot, th, th_dot]
        done = abs(x) > 2.4 or abs(th) > 0.2095
        return self.s, 1.0, done


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 128), nn.Dropout(0.6), nn.ReLU(), nn.Linear(128, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).softmax(-1)


def select_action(policy: Policy, state: list[float], log_probs: list[torch.Tensor]) -> int:
    probs = policy(torch.tensor(state).unsqueeze(0))
    m = Categorical(probs)
    action = m.sample()
    log_probs.append(m.log_prob(action))
    return int(action.item())


def finish_episode(
    opt: torch.optim.Optimizer, log_probs: list[torch.Tensor], rewards: list[float]
) -> None:
    returns, r = [], 0.0
    for reward in reversed(rewards):
        r = reward + 0.99 * r
        returns.insert(0, r)
    ret = torch.tensor(returns)
    ret = (ret - ret.mean()) / (ret.std() + 1e-6) if len(returns) > 1 else ret * 0
    loss = torch.cat([-lp * g for lp, g in zip(log_probs, ret, strict=True)]).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")  # accepted; changes nothing
    parser.parse_args()
    torch.manual_seed(543)
    env, policy = CartPole(543), Policy()
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    running = 10.0
    for episode in range(1, EPISODES + 1):
        state, log_probs, rewards = env.reset(), [], []
        for _t in range(500):
            state, reward, done = env.step(select_action(policy, state, log_probs))
            rewards.append(reward)
            if done:
                break
        running = 0.05 * len(rewards) + 0.95 * running
        finish_episode(opt, log_probs, rewards)
        if episode % 20 == 0:
            print(f"episode {episode} length {len(rewards)} running {running:.1f}", flush=True)


if __name__ == "__main__":
    main()
