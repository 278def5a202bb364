"""Serving the frozen user simulator: OpenAI-compatible HTTP (``mimesis serve``) and the terminal
(``mimesis chat``).

* :mod:`mimesis.serve.app` — FastAPI app, middleware, error handlers, ``run_server``.
* :mod:`mimesis.serve.service` — endpoint logic: scenario, episode checks, end signal.
* :mod:`mimesis.serve.messages` — agent-side request → simulator history + agent message.
* :mod:`mimesis.serve.batching` — concurrent requests → one batched simulator call.
* :mod:`mimesis.serve.fitting` — a view into the prompt budget (old exchanges, then the middle
  of a long agent message, left out).
* :mod:`mimesis.serve.backends` — transformers / vLLM / plain-function engines.
* :mod:`mimesis.serve.episodes` — episode store with TTL and LRU cap.
* :mod:`mimesis.serve.schemas` — wire format and errors (:mod:`mimesis.serve.invalid`: a body
  that does not parse, in our words); :mod:`mimesis.serve.config` — settings.
* :mod:`mimesis.serve.chat` — play the agent against the simulator in a terminal.

Nothing here imports torch, transformers or vLLM at module level.
"""
