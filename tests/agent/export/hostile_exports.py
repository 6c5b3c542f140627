"""Hostile texts for the kernel exports, and the check that importing an export runs nothing but the kernel.

Each text carries a payload that writes a marker file if it ever runs as code: after a newline (ending a
comment), after a closing triple quote (ending a docstring), after a backslash continuation, after `#`, NUL, a
carriage return or a right-to-left override. The kernel's own module writes another marker, so a test sees that
the kernel ran and that nothing else did."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def payload(marker: Path) -> str:
    return f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')"


def hostile_texts(marker: Path, nul: bool = True) -> list[str]:
    """Names a user could give a problem (and so a kernel); `nul=False` for what Postgres can store."""
    code = payload(marker)
    texts = [
        f"relu.py\n{code}\n#",
        f'x"""\n{code}\n"""',
        f"x'''\n{code}\n'''",
        f"x\\\n{code}",
        f"x # {{ }}\n{code}  # ",
        f"x\r{code}",
        f'"; {code}; "',
        f"x\u202e\n{code}\u2066 \u200f",
        f"\\N{{}}\\u'\\\n{code}",
        f"x\f\v\n\n{code}",
    ]
    if nul:
        texts.append(f"x\x00\n{code}")
    return texts


def kernel_source(kernel_marker: Path) -> str:
    """A kernel module (nothing to compile) whose body marks that it ran."""
    return (f"import pathlib as _p\n_p.Path({str(kernel_marker)!r}).touch()\n\nimport torch\n\n\n"
            "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n")


CHECK_MODULES = r'''
import json, runpy, sys
facts = []
for path in sys.argv[1:]:
    namespace = runpy.run_path(path)
    assert callable(namespace["load"]) and "ModelNew" in namespace
    facts.append(namespace["KSTUDIO_FACTS"])
print(json.dumps(facts))
'''

CHECK_PACKAGES = r'''
import importlib, json, sys
found = []
for name in sys.argv[1:]:
    k = importlib.import_module(name)
    k._import("kernel")  # the kernel's module body, as model() runs it
    found.append({"NAME": k.NAME, "OP_NAME": k.OP_NAME, "facts_name": k.FACTS["name"],
                  "problem_name": k.FACTS["problem_name"]})
print(json.dumps(found))
'''


def import_modules(paths: list[Path], cwd: Path) -> list[dict]:
    """Run every exported .py in a fresh interpreter; their KSTUDIO_FACTS."""
    done = subprocess.run([sys.executable, "-c", CHECK_MODULES, *map(str, paths)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def install_and_import_packages(zips: list[Path], names: list[str], tmp: Path) -> list[dict]:
    """pip install every zip (no dependencies: this interpreter has torch), then import each package and
    its kernel module in a fresh interpreter."""
    target = tmp / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                              "--no-build-isolation", "--no-index", "--target", str(target), *map(str, zips)],
                             capture_output=True, text=True, timeout=600, cwd=tmp)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": str(target), "TORCH_EXTENSIONS_DIR": str(tmp / "extensions")}
    done = subprocess.run([sys.executable, "-c", CHECK_PACKAGES, *names], capture_output=True, text=True, timeout=600,
                          cwd=tmp, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
