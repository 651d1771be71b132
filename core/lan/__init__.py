"""LAN mode: DNS-SD names and TXT records, the in-process mailbox, mDNS."""
