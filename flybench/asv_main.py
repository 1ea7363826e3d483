"""asv's command line, with its machine file (~/.asv-machine.json) replaced atomically.

Every `asv run` rewrites that file as it starts (asv's `Machine.load` saves
what it loaded) by opening it for writing and dumping into it. `flybench run
--gpus` starts one asv per GPU at once, and a worker that read the file while
another was rewriting it found it empty and ended before measuring anything
("Error parsing JSON in file '~/.asv-machine.json'"). Here the file is
written beside itself and moved into place, so a reader finds the old file or
the new one, never half of one. With `FLYBENCH_ONE_PROCESS` set (`flybench
run --one-process`), every case of the invocation runs in one measuring
process (`flybench.asv_spawner`). Everything else is asv's own `main`:

    python -m flybench.asv_main run --config asv.conf.json ...
"""

from __future__ import annotations

import os

from asv import machine, util
from asv.main import main

from flybench import envvars


def _save(cls: type[machine.MachineCollection], machine_name: str, machine_info: dict,
          _path: str | None = None) -> None:
    """`MachineCollection.save`, writing a temporary file and renaming it over the machine file."""
    path = _path or cls.get_machine_file_path()
    known = util.load_json(path) if os.path.isfile(path) else {}
    known[machine_name] = machine_info
    written = f"{path}.{os.getpid()}.tmp"
    try:
        util.write_json(written, known, cls.api_version)
        os.replace(written, path)
    finally:
        if os.path.exists(written):
            os.unlink(written)


machine.MachineCollection.save = classmethod(_save)

if __name__ == "__main__":
    if os.environ.get(envvars.ONE_PROCESS):
        from flybench.asv_spawner import install

        install()
    main()
