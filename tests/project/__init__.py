"""Checks of the repository as a whole: the floor plan, the docs, the CI gate, the test servers."""
