"""Spark + Delta stages: ingest, validate, fit, measure, maintenance."""
