"""A TCP proxy that adds round-trip time, as between machines: every piece of data
waits DELAY_MS / 2 before it is passed on, in each direction, in order.

Usage: python3 delay_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS
Prints `ready PORT` once it listens; runs until killed. Used by scripts/bench-postgres-latency.sh
(BENCHMARKS §3, issue 47): PostgreSQL 0, 1 and 5 ms away from buddy.
"""
import asyncio
import sys


async def pipe(reader, writer, delay):
    """Copies reader to writer, each piece `delay` seconds late, order kept."""
    queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def read():
        while True:
            data = await reader.read(65536)
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
        await asyncio.gather(
            pipe(client_reader, server_writer, one_way),
            pipe(server_reader, client_writer, one_way),
            return_exceptions=True,
        )

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    print(f"ready {listen}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
