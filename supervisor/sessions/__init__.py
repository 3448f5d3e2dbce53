"""Sessions: one conversation of an agent host, its handlers of server requests, its
subscriptions, and the trust decisions and approvals of its calls."""
