"""Our modules that run inside a kernel, shipped there as source (the kernel's Python need not
have pytest-super installed, and no image is rebuilt for them): `kernel_module` is an expression
that evaluates, in the kernel, to one of them.

The module is loaded once per kernel process under a private name in the kernel's `sys.modules`,
out of the user's namespace (`%reset` and `del` of user names leave it alone); a new or restarted
kernel loads it again, from the source the expression carries. Each call is then
`<expression>.function(arguments)`. Modules shipped this way import only the standard library.
"""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def kernel_module(package: str, filename: str) -> str:
    """The expression for the module `filename` of `package` (e.g. "pytest_super.kernels",
    "file_access.py") in a kernel: from the kernel's sys.modules, else loaded there first."""
    source = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    name = "_pytest_super_" + filename.removesuffix(".py")
    return (
        f"(__import__('sys').modules.get({name!r}) or (lambda m: (exec(compile({source!r}, "
        f"{'<pytest-super ' + filename + '>'!r}, 'exec'), m.__dict__), "
        f"__import__('sys').modules.setdefault({name!r}, m))[1])(__import__('types').ModuleType({name!r})))"
    )
