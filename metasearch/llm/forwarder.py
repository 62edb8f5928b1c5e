"""Inside a sandbox: relay a loopback TCP port to the gateway's unix socket (standard library only).

Third-party agents expect ``OPENAI_BASE_URL=http://host:port/v1``; the sandbox has no network, only the
socket. Start this in the background, then point the agent at it::

    python3 /run/metasearch/forwarder.py --port 8088 &
    export OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=none

Bytes are copied both ways unchanged, connection by connection, so keep-alive and parallel calls work.
It prints ``ready`` once it listens.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _serve(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8088)
    parser.add_argument(
        "--socket", default=os.environ.get("METASEARCH_LLM_SOCKET", "/run/metasearch/llm.sock")
    )
    args = parser.parse_args(argv)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print("ready", flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve, args=(client, args.socket), daemon=True).start()


if __name__ == "__main__":
    main()
