"""Planning methods and their queueing models.

Each method takes the fitted model and the application config and returns a
:class:`streamplan.plan.Decision`; :mod:`optimizers.registry` maps method names to them.
Nothing here imports Spark.
"""
