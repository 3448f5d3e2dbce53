"""What several test modules share: fakes, servers started in process or as processes,
certificates, the admin API's test client (no tests of its own)."""
