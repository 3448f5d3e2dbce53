"""Transports do the I/O for a connection actor; the protocol core stays pure."""
