"""Meeting the peer: codes, the mailbox protocol, SPAKE2 and the phase keys."""
