#!/usr/bin/env python3
"""A test DNS server (UDP): answers A queries for *.mkv.test as the file
MODE says: 'answer IP' (after 'delay S' if given), 'hold' (never answers),
'servfail', 'nx' (NXDOMAIN).  AAAA: no records.  Usage: dns.py ADDR MODEFILE"""
import socket, struct, sys, threading, time

addr, modefile = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, 53))

def mode():
    try:
        return open(modefile).read().split()
    except OSError:
        return ["hold"]

def answer(q, frm):
    m = mode()
    delay = 0.0
    if m and m[0] == "delay":
        delay = float(m[1]); m = m[2:]
    if delay:
        time.sleep(delay)
    if not m or m[0] == "hold":
        return
    i = 12
    while i < len(q) and q[i]:
        i += q[i] + 1
    i += 5
    if i > len(q):
        return
    qtype = struct.unpack(">H", q[i-4:i-2])[0]
    hdr = bytearray(q[:12])
    hdr[2] = 0x81
    rcode = {"servfail": 2, "nx": 3}.get(m[0], 0)
    hdr[3] = 0x80 | rcode
    body = q[12:i]
    an = b""
    if rcode == 0 and qtype == 1:
        an = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04" + socket.inet_aton(m[1])
    struct.pack_into(">HHHH", hdr, 4, 1, 1 if an else 0, 0, 0)
    s.sendto(bytes(hdr) + body + an, frm)

while True:
    q, frm = s.recvfrom(512)
    with open(modefile + ".log", "a") as f:
        f.write("%.3f %s\n" % (time.time(), " ".join(mode())))
    threading.Thread(target=answer, args=(q, frm), daemon=True).start()
