"""The protocol's core (DESIGN §2-§5, §8): hours and series, cases and splits, the contract and decision loss,
the tariff, the one DP optimizer, the scoring formulas (CRPS, RCRPS, R, S, aggregation) and the episode
scorer. These modules know no env, agent, evaluation or CLI.
"""
