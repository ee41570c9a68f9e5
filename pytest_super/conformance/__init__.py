"""The backend conformance suite: behaviour tests every kernel backend must pass.

    pytest --pyargs pytest_super.conformance --super-backend NAME

runs them against the backend NAME (a built-in name, an entry point of `pytest_super.backends`,
or `package.module:Class`), its kernels provisioned through the backend registry with the
`KernelSettings` a run with the same options would use (`--super-image`, `--super-mem`,
`--super-docker-host`, ...). A test that needs a capability the backend declares it lacks
(`unsupported` on the backend class, `kernels.base.CAPABILITIES`) is skipped with the backend's
reason. See docs/backends.md.
"""
