"""MIMESIS: user simulators learned from real human conversations (library; never imports Prefect).

Importing the package changes nothing in the process: the offline, no-telemetry environment
defaults (:mod:`mimesis.runtime_env`) are applied by the entry points — the ``mimesis`` CLI,
``python -m mimesis.stages.<name>`` and each stage's ``main()``, the Prefect flows.
"""

__version__ = "0.1.0"
