"""The call path: a turn over one catalog epoch, its surface beyond tools, what each call
may use, and the one audit row every call attempt leaves."""
