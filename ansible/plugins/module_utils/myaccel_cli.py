"""Run the myaccel command line on a managed host and read its JSON documents.

Shared by the collection's modules: the server options every command takes (a sandbox,
an option file, a socket, host and port, a user; the password goes through MYSQL_PWD,
never argv), MYACCEL_HOME (where journals live), and the one way to run a command and
parse its JSON answer, turning myaccel's ``error:``/``hint:`` lines into a module failure.
"""

from __future__ import annotations

import json
import os

SERVER_ARGS = dict(
    executable=dict(type="str", default="myaccel"),
    home=dict(type="path"),
    sandbox=dict(type="str"),
    defaults_file=dict(type="path"),
    socket=dict(type="path"),
    login_host=dict(type="str"),
    login_port=dict(type="int"),
    login_user=dict(type="str"),
    login_password=dict(type="str", no_log=True),
)


def server_argv(params):
    """The server options of a myaccel command, from the module's parameters."""
    argv = []
    for name, flag in (
        ("sandbox", "--sandbox"),
        ("defaults_file", "--defaults-file"),
        ("socket", "--socket"),
        ("login_host", "--host"),
        ("login_port", "--port"),
        ("login_user", "--user"),
    ):
        value = params.get(name)
        if value is not None:
            argv += [flag, str(value)]
    return argv


def environ(params):
    env = {}
    if params.get("home"):
        env["MYACCEL_HOME"] = params["home"]
    if params.get("login_password") is not None:
        env["MYSQL_PWD"] = params["login_password"]
    return env


def error_lines(stderr):
    """myaccel's ``error:`` and ``hint:`` lines (the whole stderr tail otherwise)."""
    lines = [x for x in stderr.splitlines() if x.startswith(("error:", "hint:"))]
    return " ".join(lines) if lines else stderr.strip()[-600:]


def run(module, args, ok_rcs=(0,), parse=True):
    """Run ``myaccel ARGS``; returns (rc, parsed JSON or None, stderr). Fails the module
    on an exit code outside ``ok_rcs`` with myaccel's own message. ``parse=False`` for
    commands whose output is for people (their artifacts are read instead)."""
    argv = [module.params["executable"], *args]
    env = dict(os.environ)
    env.update(environ(module.params))
    rc, out, err = module.run_command(argv, environ_update=env)
    if rc not in ok_rcs:
        module.fail_json(
            msg=error_lines(err) or f"myaccel exited {rc}", rc=rc, cmd=argv, stderr=err
        )
    doc = None
    if parse and out.strip():
        try:
            doc = json.loads(out)
        except ValueError:
            module.fail_json(msg="myaccel did not print JSON", rc=rc, cmd=argv, stdout=out[-2000:])
    return rc, doc, err
