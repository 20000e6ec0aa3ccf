"""A TCP proxy in one process, for tests that stop a server they do not own.

    python tests/deploy/tcp_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT

Forwards every connection to the target, one thread per direction. The
machine's PostgreSQL is shared by other people, so a test never stops it:
it kills this process instead (SIGKILL closes every forwarded connection
at once, and the port refuses new ones) or freezes it (SIGSTOP: connections
are accepted by the kernel and never answered), then starts it again on
the same port. Prints "listening" once it accepts connections.
"""
import socket
import sys
import threading


def pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main() -> None:
    port, host, target_port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    print("listening", flush=True)
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection((host, target_port), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    main()
