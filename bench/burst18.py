#!/usr/bin/python3
"""burst18.py URL CA N -- row 18g: while N sockets each send a whole TLS
ClientHello at once (each costs the server a signature) and then wait,
one kept-alive HTTPS connection GETs URL (a 302) every 10 ms; prints the
99th percentile of those GETs' latency in ms, from the burst's start until
every burst socket has had its answer and 1 s more."""
import http.client, select, socket, ssl, sys, threading, time

url, ca, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = url.split("://")[1].split("/")[0].split(":")
path = "/" + url.split("://")[1].split("/", 1)[1]
plain = ssl.create_default_context()
plain.check_hostname, plain.verify_mode = False, ssl.CERT_NONE
bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
try:
    plain.wrap_bio(bio_in, bio_out, server_hostname=host).do_handshake()
except ssl.SSLWantReadError:
    pass
hello = bio_out.read()
c = http.client.HTTPSConnection(host, int(port), timeout=120,
                                context=ssl.create_default_context(cafile=ca))
c.request("GET", path)
c.getresponse().read()
lat, stop = [], threading.Event()


def timer():
    while not stop.is_set():
        t = time.perf_counter()
        c.request("GET", path)
        c.getresponse().read()
        lat.append((time.perf_counter() - t) * 1000)
        time.sleep(0.01)


th = threading.Thread(target=timer)
th.start()
burst = []
for _ in range(n):
    s = socket.create_connection((host, int(port)))
    s.sendall(hello)
    burst.append(s)
poll, end, left = select.poll(), time.monotonic() + 120, len(burst)
for s in burst:
    poll.register(s, select.POLLIN)
while left and time.monotonic() < end:
    for fd, _ in poll.poll(1000):
        poll.unregister(fd)
        left -= 1
time.sleep(1)
stop.set()
th.join()
lat.sort()
print("%.1f" % lat[min(len(lat) - 1, int(len(lat) * 0.99))])
