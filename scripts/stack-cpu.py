#!/usr/bin/python3
"""One TCP stream of fixed-size messages between two hosts of scripts/cluster,
for the network stack's CPU per message and per byte (the third and fourth
fields of `--net`).

    stack-cpu.py recv PORT SIZE COUNT        (on one host) then
    stack-cpu.py send HOST PORT SIZE COUNT   (on another)

The receiver reads COUNT messages of SIZE bytes, each with one blocking read
of exactly SIZE bytes (as an MPI rank reads a message it expects); the sender
writes them back to back with TCP_NODELAY (as Open MPI's TCP transport does)
and waits for the receiver's one-byte acknowledgement. Nobody polls: a side
with nothing to do sleeps in the kernel, so the machine's system and softirq
time around a run is the stack's work for the messages (plus the run's fixed
start-up, which a second run with another COUNT cancels: scripts/fit-net.py
--stack). Python's own time per call is user time, which is not counted.
"""
import socket
import sys
import time


def recv_exactly(conn, view):
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:], len(view) - got, socket.MSG_WAITALL)
        if n == 0:
            sys.exit(f"stack-cpu.py: the sender closed after {got} of {len(view)} bytes")
        got += n


def receive(port, size, count):
    with socket.create_server(("0.0.0.0", port)) as srv:
        conn, _ = srv.accept()
        with conn:
            buf = memoryview(bytearray(size))
            for _ in range(count):
                recv_exactly(conn, buf)
            conn.sendall(b"k")


def send(host, port, size, count):
    for _ in range(100):  # the receiver may not listen yet
        try:
            conn = socket.create_connection((host, port), timeout=60)
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    else:
        sys.exit(f"stack-cpu.py: nobody listens on {host}:{port}")
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = bytes(size)
        for _ in range(count):
            conn.sendall(msg)
        if conn.recv(1) != b"k":
            sys.exit("stack-cpu.py: no acknowledgement")


def main():
    args = sys.argv[1:]
    try:
        if args[:1] == ["recv"] and len(args) == 4:
            receive(int(args[1]), int(args[2]), int(args[3]))
            return
        if args[:1] == ["send"] and len(args) == 5:
            send(args[1], int(args[2]), int(args[3]), int(args[4]))
            return
    except ValueError as e:
        sys.exit(f"stack-cpu.py: {e}")
    sys.exit(__doc__)


main()
