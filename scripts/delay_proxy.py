"""A TCP proxy that adds round-trip time, as between machines: every piece of data
waits DELAY_MS / 2 before it is passed on, in each direction, in order.

Usage: python3 delay_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS
Prints `ready PORT` once it listens; runs until killed. On SIGUSR1 it prints
`round_trips N`: over all connections so far, how many times a client spoke after the
server had (or first) — one round trip each, however the data was cut into pieces
(issue 47 item 1 counts a turn's round trips with it). Used by
scripts/bench-postgres-latency.sh and scripts/bench-postgres.sh (BENCHMARKS §3).
"""
import asyncio
import signal
import sys

# Round trips over all connections so far (see the usage above).
ROUND_TRIPS = [0]


async def pipe(reader, writer, delay, side, spoke):
    """Copies reader to writer, each piece `delay` seconds late, order kept. `side` is who
    reads here ("client" or "server"); `spoke` is the connection's [who spoke last]."""
    queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def read():
        while True:
            data = await reader.read(65536)
            if data:
                if side == "client" and spoke[0] != "client":
                    ROUND_TRIPS[0] += 1
                spoke[0] = side
            await queue.put((loop.time() + delay, data))
            if not data:
                return

    async def write():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    try:
        await asyncio.gather(read(), write())
    except (ConnectionError, asyncio.IncompleteReadError):
        writer.close()


async def main():
    listen, host, port, delay_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    one_way = delay_ms / 2000.0

    async def serve(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        spoke = [None]
        await asyncio.gather(
            pipe(client_reader, server_writer, one_way, "client", spoke),
            pipe(server_reader, client_writer, one_way, "server", spoke),
            return_exceptions=True,
        )

    asyncio.get_running_loop().add_signal_handler(
        signal.SIGUSR1, lambda: print(f"round_trips {ROUND_TRIPS[0]}", flush=True)
    )
    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    print(f"ready {listen}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
