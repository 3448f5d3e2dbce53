"""What keeps a supervisor running: nested lifetimes, the connection actors' one-for-one
supervisor, warm spares, reloads, the state directory, logs and metrics."""
