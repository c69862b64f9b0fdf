#!/bin/bash
# A local test CA and a server certificate for localhost and 127.0.0.1 (for moodle_lti_more.sh's
# LTI_HTTPS=1 leg): writes ca.crt, server.crt, server.key and bundle.pem (the system's CAs and
# this one, for the grader's requests and Moodle's cURL) into the folder given.
set -euo pipefail
TLS=${1:?folder}
mkdir -p "$TLS" && cd "$TLS"
[ -f server.crt ] && exit 0
openssl req -x509 -newkey rsa:2048 -nodes -days 3 -subj "/CN=attn-grader LTI test CA" \
  -keyout ca.key -out ca.crt -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n" > ext.cnf
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 \
  -out server.crt -extfile ext.cnf 2>/dev/null
cat /etc/ssl/certs/ca-certificates.crt ca.crt > bundle.pem
chmod 600 ca.key server.key
