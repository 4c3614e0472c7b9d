"""``purgatory bench``: Kafka's purgatory workload and a timer micro-benchmark, measured
against hand-written asyncio baselines (see ``cli.py``)."""
