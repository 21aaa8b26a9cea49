"""A metadata-store client in its own process, driven line by line over stdin.

Usage: python meta_child.py URL SESSION_TIMEOUT
Prints "READY <session id>", then answers each command with one line:
  create PATH DATA [eph]   -> "OK <created path>"
  set PATH DATA            -> "OK <version>"
  get PATH                 -> "OK <data>"
  watch PATH               -> "OK" now, later "EVENT <type> <path>" (an exists watch)
  quit                     -> closes the store and exits
Errors print "ERR <exception class>". Losing the session prints "LOST".
"""

from __future__ import annotations

import asyncio
import sys

from store.meta.api import WatchEvent
from store.meta.factory import open_meta


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def on_event(event: WatchEvent) -> None:
    emit(f"EVENT {event.type.value} {event.path}")


async def main(url: str, session_timeout: float) -> None:
    store = open_meta(url, session_timeout=session_timeout)
    await store.start()
    store.add_session_listener(lambda: emit("LOST"))
    emit(f"READY {store.session_id}")
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd, *args = line.split()
        try:
            if cmd == "quit":
                break
            if cmd == "create":
                created = await store.create(args[0], args[1].encode(), ephemeral=args[2:] == ["eph"])
                emit(f"OK {created}")
            elif cmd == "set":
                stat = await store.set(args[0], args[1].encode())
                emit(f"OK {stat.version}")
            elif cmd == "get":
                data, _ = await store.get(args[0])
                emit(f"OK {data.decode()}")
            elif cmd == "watch":
                await store.exists(args[0], watch=on_event)
                emit("OK")
            else:
                emit(f"ERR unknown command {cmd}")
        except Exception as e:
            emit(f"ERR {type(e).__name__}")
    await store.close()
    emit("BYE")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
