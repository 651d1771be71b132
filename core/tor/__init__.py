"""Reaching Tor: finding or launching it, onion services, SOCKS endpoints."""
