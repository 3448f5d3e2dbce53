"""What every web app of `serve` shares, with no framework: bearer tokens and roles, the
route table, the guard (Host, Origin, loopback, request target, role refusals), API
errors, the secret scrubber, held sessions, and the read-only interfaces through which
the admin API lists the gateway's and the bridge's state."""
