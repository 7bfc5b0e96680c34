#!/bin/sh
# tls_certs.sh DIR -- the certificates the TLS tests use, made now by
# openssl (nothing secret is committed): a CA (ca.pem), and signed by it
#   srv.pem/srv.key      for 127.0.0.1 and localhost
#   renewed.pem/.key     the same names, a new key (SIGHUP's renewal)
#   other.pem/other.key  for other.example only (a name that does not match)
#   expired.pem/.key     for 127.0.0.1 and localhost, expired in 2020
# and wrongca.pem, a CA that signed none of them.
set -eu
d=$1
mkdir -p "$d"
cd "$d"
q() { "$@" 2>/dev/null >/dev/null; }
q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=mkv-test-ca
q openssl req -x509 -newkey rsa:2048 -nodes -keyout wrongca.key -out wrongca.pem -days 2 -subj /CN=mkv-other-ca
cert() {   # name san
	printf 'subjectAltName=%s\n' "$2" >"$1.ext"
	q openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$1"
	q openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
		-days 2 -extfile "$1.ext"
}
cert srv "IP:127.0.0.1,DNS:localhost"
cert renewed "IP:127.0.0.1,DNS:localhost"
cert other "DNS:other.example"
# expired: for 127.0.0.1 and localhost, valid one day in 2020 (openssl
# x509 cannot backdate; openssl ca takes the dates)
printf '[ca]\ndefault_ca = c\n[c]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\ndefault_md = sha256\npolicy = p\ncopy_extensions = copy\n[p]\ncommonName = supplied\n' >ca.cnf
: >index.txt
echo 01 >serial
q openssl req -newkey rsa:2048 -nodes -keyout expired.key -out expired.csr -subj /CN=expired \
	-addext "subjectAltName=IP:127.0.0.1,DNS:localhost"
q openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
	-startdate 20200101000000Z -enddate 20200102000000Z
