"""The options every server-reaching module of myaccel.fleet takes (module_utils SERVER_ARGS)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  executable:
    description: The myaccel command (the role's venv puts it in C(/opt/myaccel/bin)).
    type: str
    default: myaccel
  home:
    description: MYACCEL_HOME on the host (journals, sandboxes).
    type: path
  sandbox:
    description: A myaccel sandbox name instead of a server reached by the options below.
    type: str
  defaults_file:
    description: Read only this option file for the connection.
    type: path
  socket:
    description: Unix socket of the server.
    type: path
  login_host:
    description: Server host.
    type: str
  login_port:
    description: Server port.
    type: int
  login_user:
    description: Server user.
    type: str
  login_password:
    description: Server password (passed as MYSQL_PWD).
    type: str
"""
