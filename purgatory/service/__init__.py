"""The HTTP long-poll service (``purgatory serve``) over the simulated broker.

Importing this package is cheap: aiohttp is only imported by the modules that need it
(:mod:`purgatory.service.app`), so ``purgatory --help`` works without the ``service`` extra.
"""
