"""streamplan: replan stream-processing deployments from their own telemetry."""

__version__ = "0.1.0"
