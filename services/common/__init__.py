"""Shared server bootstrap, settings, logging, errors and the generated gRPC stubs."""
