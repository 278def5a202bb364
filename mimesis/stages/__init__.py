"""The pipeline stages, one module each: ``run()`` plus the ``main()`` that ``dvc repro`` calls.

Importing this package applies the runtime environment defaults
(:func:`mimesis.runtime_env.configure_environment`): ``python -m mimesis.stages.<name>`` imports
it before the stage module, whose imports load torch and huggingface_hub, which read
``OMP_WAIT_POLICY`` and ``HF_HUB_OFFLINE`` once, when they load. Library code never imports
this package; ``import mimesis`` leaves the environment alone.
"""

from mimesis.runtime_env import configure_environment

configure_environment()
