"""The router: catalog epochs, namespacing, envelopes."""
