"""A hilltop sender that advertises only the features it is told, built on the library API.

Real hilltop peers list every feature this build has; a peer of another version, or another
implementation, may list any subset (issue 27: ``resume-v1`` without ``big-records`` made
every resume fail). This sends one file with the given ``features`` (comma-separated) and
prints where the receiver let it resume.

Usage: feature_sender.py RELAY_URL TRANSIT_HELPER CODE PATH FEATURES
"""

from __future__ import annotations

import sys


async def main(reactor: object, relay_url: str, helper: str, code: str, path: str,
               features: str) -> None:
    from hilltop import __version__
    from hilltop.api import Wormhole
    from hilltop.cli.send import close_quietly
    from hilltop.rendezvous.capabilities import advertisement
    from hilltop.transfer import session
    from hilltop.transfer.source import open_source

    listed = [f for f in features.split(",") if f]
    w = Wormhole(relay_url=relay_url, reactor=reactor,
                 app_versions=advertisement(__version__, [], listed))
    w.set_code(code)
    source = open_source(path)
    try:
        await session.send(
            reactor, w, source, session.TransitOptions(transit_helpers=[helper]),
            listener=session.Listener(on_resume=lambda offset, why: print(
                f"resume at {offset} {why}".rstrip(), flush=True)))
        print("sent", flush=True)
    finally:
        source.close()
        await close_quietly(w)


if __name__ == "__main__":
    from hilltop.cli.common import run

    args = sys.argv[1:]
    run(lambda reactor: main(reactor, *args))
