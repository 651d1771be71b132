"""Print every hilltop DNS-SD service that appears or goes away, with a timestamp.

Run inside a test namespace (never on the host's interfaces): ``python mdns_watch.py``. Lines
look like ``added nameplate-42._wormhole._tcp.local. 1733221234.123``; a ``removed`` line means
the announcer sent its goodbye (or its record expired, which takes far longer than a test).
"""

from __future__ import annotations

import asyncio
import sys
import time

from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncZeroconf

from hilltop.lan.wire import SERVICE_TYPE


def main() -> None:
    async def run() -> None:
        azc = AsyncZeroconf(ip_version=IPVersion.V4Only)

        def changed(zeroconf: object, service_type: str, name: str,
                    state_change: ServiceStateChange) -> None:
            word = {ServiceStateChange.Added: "added",
                    ServiceStateChange.Removed: "removed"}.get(state_change)
            if word:
                print(f"{word} {name} {time.time():.3f}", flush=True)

        browser = AsyncServiceBrowser(azc.zeroconf, [SERVICE_TYPE], handlers=[changed])
        print("watching", flush=True)
        try:
            await asyncio.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 120)
        finally:
            await browser.async_cancel()
            await azc.async_close()

    asyncio.run(run())


if __name__ == "__main__":
    main()
