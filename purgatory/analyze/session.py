"""Creating (or reusing) the SparkSession with the configuration a user expects.

Rules: an explicit ``--master`` wins; otherwise a master already set by spark-submit,
``PYSPARK_SUBMIT_ARGS`` or ``spark-defaults.conf`` is kept; otherwise ``local[*]``.
Driver memory only matters when this process launches the JVM (it sizes the heap).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_DRIVER_MEMORY = "2g"
APP_NAME = "purgatory-analyze"

# Keeps the JVM quiet from its very first line (setLogLevel only applies after startup).
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
"""


@dataclass(frozen=True)
class SessionInfo:
    """How the session was obtained, so that the caller only stops what it started."""

    spark: SparkSession
    owned: bool
    master: str


def default_shuffle_partitions(master: str) -> int | None:
    """2 x cores in local mode (Spark's 200 is far too many for one machine)."""
    if not master.startswith("local"):
        return None
    spec = master[len("local") :].strip("[]").split(",")[0]  # local, local[N], local[N,F]
    cores = os.cpu_count() or 2
    if not spec:
        cores = 1  # plain "local" runs one worker thread
    elif spec != "*":
        try:
            cores = int(spec)
        except ValueError:
            pass
    return max(2, 2 * cores)


_MIN_SPLITS = "spark.sql.files.minPartitionNum"


def _is_set(spark: SparkSession, key: str) -> bool:
    return spark.conf.get(key, None) is not None


def _log4j_file() -> str:
    fd, path = tempfile.mkstemp(prefix="purgatory-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as fh:
        fh.write(_LOG4J2)
    return path


def get_session(
    master: str | None = None,
    driver_memory: str | None = None,
    shuffle_partitions: int | None = None,
    jvm_log: str | None = None,
) -> SessionInfo:
    """Return a SparkSession configured for the analysis; ``owned`` says whether we made it.

    With ``jvm_log``, a JVM started here writes its console output (startup warnings, log4j
    messages) to that file instead of this process's stderr.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    owned = active is None
    if active is not None:
        spark = active
        if driver_memory is not None:
            print(
                "purgatory analyze: a Spark session is already running; "
                "--driver-memory has no effect",
                file=sys.stderr,
            )
    else:
        log4j_path: str | None = None
        gateway_running = SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ
        if not gateway_running:
            # Launch the JVM ourselves so that the heap size and log config apply, then read
            # back the conf it loaded (spark-submit args, spark-defaults.conf) for the master.
            launch = SparkConf(loadDefaults=False)
            launch.set("spark.driver.memory", driver_memory or DEFAULT_DRIVER_MEMORY)
            log4j_path = _log4j_file()
            launch.set(
                "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j_path}"
            )
            gateway = None
            if jvm_log is not None:
                from pyspark.java_gateway import launch_gateway

                with open(jvm_log, "ab") as log:  # the JVM keeps its own copy of the handle
                    streams = {"stdout": log, "stderr": log}
                    gateway = launch_gateway(launch, popen_kwargs=streams)  # type: ignore[no-untyped-call]
            SparkContext._ensure_initialized(gateway=gateway, conf=launch)
        existing = SparkConf()
        builder = SparkSession.builder.appName(APP_NAME)
        if master is not None:
            builder = builder.master(master)
        elif not existing.contains("spark.master"):
            builder = builder.master("local[*]")
        # Our own progress line replaces Spark's console progress bar.
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        builder = builder.config("spark.sql.session.timeZone", "UTC")
        spark = builder.getOrCreate()
        if log4j_path is not None:
            os.unlink(log4j_path)  # read once by log4j at JVM startup
    spark.sparkContext.setLogLevel("WARN")
    effective_master = str(spark.sparkContext.master or "")
    partitions = shuffle_partitions or default_shuffle_partitions(effective_master)
    if partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    if owned and effective_master.startswith("local") and not _is_set(spark, _MIN_SPLITS):
        # Gzip files cannot be split: without this Spark packs several ~100 MB .gz files
        # into one task, leaving cores idle. More, smaller input tasks balance the load.
        local_partitions = default_shuffle_partitions(effective_master) or 2
        spark.conf.set(_MIN_SPLITS, str(2 * local_partitions))
    return SessionInfo(spark=spark, owned=owned, master=effective_master)
