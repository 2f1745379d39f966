"""One local SparkSession for every analytics test (Spark startup costs ~10 s)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from pyspark import sql


@pytest.fixture(scope="session")
def spark() -> Iterator[sql.SparkSession]:
    if shutil.which("java") is None:
        pytest.skip("Spark needs java")
    session = (
        sql.SparkSession.builder.master("local[2]")
        .appName("kooper-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Tiny inputs: planning and code generation dominate, not data. One
        # shuffle partition, no adaptive re-planning and interpreted expressions
        # halve the suite's time.
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
