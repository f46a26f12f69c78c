"""The tests on every route (`tests.support.routes.every_route`), written once: tests/cpu and
tests/gpu each import them into a file of theirs, which runs them on its folder's routes."""
