"""The CPU inference engine: batched token sampling with log-probs and KV-cache reuse.

- :mod:`~mimesis.models.engine.sampling` — :class:`TokenSampler`: batched sampling with
  log-probs, KV-cache reuse across turns and shared prefixes.
- :mod:`~mimesis.models.engine.tokens` — message-level token assembly with the chat template
  (env mask, log-probs, turn ids; :class:`TemplateDriftError` for templates that rewrite history).
- :mod:`~mimesis.models.engine.kv`, :mod:`~mimesis.models.engine.prefix_cache` — the KV cache
  rows and the shared-prefix cache.
- :mod:`~mimesis.models.engine.attention` — grouped-query attention and fused linears for
  decoding on CPU.

Used by the user simulator, the agents' rollouts and the realism evaluation alike; on GPU, vLLM
replaces it (:mod:`mimesis.rl.generators`).
"""
