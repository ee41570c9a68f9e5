"""The Docker backend: one container per kernel on a Docker engine (`backend.DockerBackend`), the
engine connection and labels (`engine`), the kernel image (`image`, its build context in
`image_context/`), leases and the cleanup of leftovers (`lease`, `cleanup`), the disk watch
(`diskwatch`), the host guard (`hostguard`) and the relay to a remote engine's kernels (`relay`).
"""
