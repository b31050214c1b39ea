"""dmlnb: deep metric learning, reproduced."""

__version__ = "0.1.0"
