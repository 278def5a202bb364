"""Who plays the user: one :class:`~mimesis.users.spec.UserSpec` and one
:func:`~mimesis.users.factory.make_user` for every place a user simulator is built (training
arms, the agent evaluation's unseen users, ``fact_reveal``, ``mimesis evaluate-simulator``).

Modules: :mod:`~mimesis.users.spec` (the spec, its sampling and the params lists),
:mod:`~mimesis.users.factory` (the factory), :mod:`~mimesis.users.frozen` (the frozen simulator
as the agent stages load it), :mod:`~mimesis.users.served` (``mimesis serve`` episodes),
:mod:`~mimesis.users.chat` (endpoint and prompted local-model users),
:mod:`~mimesis.users.offline` (replay and agenda users), :mod:`~mimesis.users.unseen` (the
unseen-user registry and its refusal of the training simulator),
:mod:`~mimesis.users.identity` (what identifies the training simulator) and
:mod:`~mimesis.users.reseed` (restarting a user's randomness).

Layering: users build on ``models``, ``simulator`` and ``envs``-level code only; ``rollout``,
``rl``, ``eval`` and the stages build on users.
"""
