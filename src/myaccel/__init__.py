"""myaccel: full-stack performance acceleration for MySQL-family servers."""

__version__ = "0.1.0"
