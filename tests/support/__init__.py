"""Code the tests share: fake endpoints, second engines, projects run by pytest in a subprocess,
the published reference data, clusters."""
