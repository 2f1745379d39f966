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
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
