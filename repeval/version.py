"""RepEval's version, recorded in every fitted estimator's file."""

__version__ = "0.1.0"
