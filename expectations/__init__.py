"""Great Expectations suites for the silver tables and the reading of their results."""

from expectations.results import ExpectationError
from expectations.suites import ValidationContext, build_suite

__all__ = ["ExpectationError", "ValidationContext", "build_suite"]
