"""Agents and the one episode loop shared by every policy (DESIGN §9)."""
from fwgym.agents.base import Agent, EpisodeResult, run_episode

__all__ = ["Agent", "EpisodeResult", "run_episode"]
