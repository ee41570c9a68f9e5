"""The Jupyter wire protocol to a kernel, whatever runs it: executing cells and reading their
output (`runtime`), capping and cleaning that output (`output`)."""
