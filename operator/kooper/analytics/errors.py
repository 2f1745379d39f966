"""What ``kooper analyze`` reports as one line instead of a traceback."""

from __future__ import annotations

from kooper.core import errors


class AnalyticsError(errors.KooperError):
    """Base of the analytics job's user-facing errors."""


class JavaMissingError(AnalyticsError):
    """Spark runs on a JVM and none was found (no ``java`` on PATH, no ``JAVA_HOME``)."""


class NoInputsError(AnalyticsError):
    """No event log matched the paths given."""


class SchemaMismatchError(AnalyticsError):
    """An input file's rows do not fit the event-log schema (names the file and column)."""


class SparkStartError(AnalyticsError):
    """Spark could not start (a bad ``--master``, an unreachable cluster)."""


class SparkFailedError(AnalyticsError):
    """Spark started but the job failed (the reason's first line; the rest in spark.log)."""
