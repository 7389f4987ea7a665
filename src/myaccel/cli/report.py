"""`myaccel report`: report.html and report.md from any mix of myaccel artifacts."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--html", "want_html", is_flag=True, help="Write report.html (default: both).")
@click.option("--md", "want_md", is_flag=True, help="Write report.md (default: both).")
@click.option("--open", "open_it", is_flag=True, help="Open report.html in a browser.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the report (default: the first RUN_DIR, or the directory of a file).",
)
def report(
    run_dirs: tuple[Path, ...], want_html: bool, want_md: bool, open_it: bool, out_dir: Path | None
) -> None:
    """Build one self-contained report.html (plots, styles, script inside) and a
    GitHub-flavored report.md from results directories or artifact files: facts, plan,
    journal, runs, comparison, profile, build manifest, in any mix.

    \b
    Examples:
      myaccel report ~/.local/share/myaccel/results/20261122-055032-accelerate-52669b
      myaccel report results/ab-1 profile/profile.json --out /tmp/rep --open
    """
    from myaccel.report import HTML_NAME, write_report

    html, md = (want_html, want_md) if (want_html or want_md) else (True, True)
    first = run_dirs[0]
    out = out_dir or (first if first.is_dir() else first.parent)
    written = write_report(list(run_dirs), out, html=html, md=md)
    for p in written:
        click.echo(f"report: {p}")
    if open_it:
        target = out / HTML_NAME
        if not html or not target.exists():
            click.echo("note: --open needs report.html (drop --md or add --html)", err=True)
        else:
            click.launch(str(target))


def report_after_run(dirs: list[Path], out: Path) -> None:
    """Write report.html and report.md at the end of a command (accelerate, ab, profile,
    build). A failing report is a warning: the command's own result and exit status stand."""
    from myaccel.report import write_report

    try:
        for p in write_report(dirs, out, html=True, md=True):
            click.echo(f"report: {p}")
    except Exception as exc:  # any failure: the run's own results are saved already
        click.echo(f"warning: the report was not written: {exc}", err=True)
        click.echo(f"hint: try again with: myaccel report {out}", err=True)
