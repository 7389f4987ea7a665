"""`myaccel sandbox` (placeholder, being written)."""

import click


@click.group()
def sandbox() -> None:
    """Private MariaDB/MySQL instances for benchmarks and experiments."""
