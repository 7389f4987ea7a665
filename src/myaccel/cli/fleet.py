"""`myaccel fleet-report`: one page across the hosts of an Ansible rollout."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="fleet-report")
@click.argument("fleet_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the report (default: FLEET_DIR).",
)
def fleet_report(fleet_dir: Path, out: Path | None) -> None:
    """Write fleet-report.md and fleet-report.html from the per-host artifacts the
    collection's playbooks collect (myaccel_fleet_dir): classes, changes per host, canary
    verdicts, journals in effect and drift."""
    from myaccel.report.fleet import write_fleet_report

    for p in write_fleet_report(fleet_dir, out):
        click.echo(str(p))
