"""``sandbox:NAME/basedir``: the server build a myaccel sandbox runs (``accelerate --build
--swap-binary``). The sandbox's ``state.json`` is journaled byte for byte; apply points its
base binary at the install tree ``desired`` (same version as the datadir's: a build of
another version is refused), revert puts the file back. Either takes effect at the
sandbox's next start.

The real-server counterpart is ``systemd-binary:UNIT`` (``server_binary.py``): a systemd
drop-in whose ``ExecStart`` runs the build's ``mariadbd``."""

from __future__ import annotations

from pathlib import Path

from myaccel.actions.files import read_bytes, snapshot_file, write_file_durably
from myaccel.actions.settings.base import Change, FileBackedSetting
from myaccel.errors import UsageError

STATE = "/state.json"


class SandboxBasedirSetting(FileBackedSetting):
    kind = "sandbox"
    spec_fields = ("name", "root")

    def __init__(self, name: str, *, root: str | Path) -> None:
        super().__init__(root)  # the sandbox's directory
        self.name = name
        self.path = STATE
        self.target = f"sandbox:{name}/basedir"

    @property
    def needs_root(self) -> bool:
        return False  # a file under $MYACCEL_HOME

    def _state(self) -> dict[str, object]:
        import json

        data = read_bytes(self.root, self.path)
        if data is None:
            raise UsageError(
                f"sandbox '{self.name}' has no state.json in {self.root}",
                hint="myaccel sandbox list shows the sandboxes",
            )
        loaded = json.loads(data)
        assert isinstance(loaded, dict)
        return loaded

    def read(self) -> str | None:
        return str(self._state().get("basedir"))

    def matches(self, actual: str | None, desired: str) -> bool:
        return actual is not None and Path(actual).resolve() == Path(desired).resolve()

    def plan(self, desired: str) -> Change | None:
        current = self.read()
        snapshot_file(self.root, self.path)
        if self.matches(current, desired):
            return None
        self._install(desired)  # refused now, not at apply
        return self._change(
            current, desired, [str(self.root / "state.json")], takes_effect="sandbox restart"
        )

    def _install(self, basedir: str) -> tuple[str, str]:
        """(binary, basedir) of the install tree, checked against the datadir's version."""
        from myaccel.server.sandbox.install import find_server

        inst = find_server(Path(basedir))
        version = str(self._state().get("version"))
        if inst.version.text != version:
            raise UsageError(
                f"{inst.binary} is {inst.version.text}, sandbox '{self.name}' holds a {version} datadir",
                hint="swap only to a build of the same version",
            )
        return str(inst.binary), str(inst.basedir)

    def apply(self, desired: str) -> None:
        import json

        binary, basedir = self._install(desired)
        state = self._state()
        state.update(binary=binary, basedir=basedir, custom_basedir=True)
        data = (json.dumps(state, indent=2) + "\n").encode()
        write_file_durably(self.root, self.path, data, mode=0o600)
