"""`myaccel probe` (placeholder, being written)."""

import click


@click.command()
def probe() -> None:
    """Collect facts about the machine, the server and its binary."""
