"""Evaluation: the realism of user simulators (:mod:`mimesis.eval.realism`) and the agents
under users they never met (:mod:`mimesis.eval.agents`); :mod:`mimesis.eval.power` sizes their
paired comparisons. ``eval`` never imports ``rl`` or ``train`` (docs/architecture.md).
"""
