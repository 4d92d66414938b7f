#!/bin/sh
# Test-only keys and certificates for the end-to-end tests of the asymmetric families (tests/serve/providers.rs):
# a private root that stands in for the web's roots (trusted only through INBOX_TRUST_ROOTS), a TLS certificate for
# the provider hosts the local HTTPS server answers as, and signing certificates like PayPal's and AWS SNS's, under
# the names theirs carry (messageverificationcerts.paypal.com, sns.amazonaws.com).
# Nothing here is a real key. Regenerate with `sh make.sh` (OpenSSL 3); the tests read the files as committed.
set -eu
cd "$(dirname "$0")"
days=36500
openssl req -x509 -newkey rsa:2048 -nodes -keyout root.key -out root.pem -days $days \
  -subj "/CN=webhook-inbox test root" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign"
sign() { # name, subject, extensions
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA root.pem -CAkey root.key -CAcreateserial -out "$1.pem" -days $days \
    -extfile "$1.ext"
  rm "$1.csr" "$1.ext"
}
sign host "/CN=api.paypal.com" "subjectAltName=DNS:api.paypal.com,DNS:api-m.paypal.com,DNS:sns.us-east-1.amazonaws.com,DNS:production.plaid.com,DNS:www.googleapis.com,DNS:evil.example
basicConstraints=CA:FALSE
extendedKeyUsage=serverAuth"
sign signer "/CN=messageverificationcerts.paypal.com" "subjectAltName=DNS:messageverificationcerts.paypal.com
basicConstraints=CA:FALSE
keyUsage=digitalSignature"
# More certificates for the signer's key, from the same root: SNS's name, and a name that is neither provider's
# (a certificate anyone can get for a domain of their own; chained to a trusted root, it must still be refused).
# The receiver checks the DNS names of subjectAltName, as rustls-webpki does (the CN alone is not read).
reissue() { # name, subject, extensions
  openssl req -new -key signer.key -out "$1.csr" -subj "$2"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA root.pem -CAkey root.key -CAcreateserial -out "$1.pem" -days $days \
    -extfile "$1.ext"
  rm "$1.csr" "$1.ext"
}
reissue sns-signer "/CN=sns.amazonaws.com" "subjectAltName=DNS:sns.amazonaws.com
basicConstraints=CA:FALSE
keyUsage=digitalSignature"
reissue other-name "/CN=webhooks.attacker.example" "subjectAltName=DNS:webhooks.attacker.example
basicConstraints=CA:FALSE
keyUsage=digitalSignature"
# An unrelated root: a signing certificate from it must be refused.
openssl req -x509 -newkey rsa:2048 -nodes -keyout other-root.key -out other-root.pem -days $days \
  -subj "/CN=not trusted" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign"
openssl req -newkey rsa:2048 -nodes -keyout untrusted.key -out untrusted.csr -subj "/CN=untrusted signer"
openssl x509 -req -in untrusted.csr -CA other-root.pem -CAkey other-root.key -CAcreateserial -out untrusted.pem -days $days
rm -f untrusted.csr other-root.key *.srl root.key
# PKCS#8, as `inbox send --private-key` and aws-lc-rs read them.
for k in host signer untrusted; do openssl pkcs8 -topk8 -nocrypt -in $k.key -out $k.key.tmp && mv $k.key.tmp $k.key; done
# The asymmetric families' own keys (PKCS#8 private, SubjectPublicKeyInfo public), as a provider would hand them.
openssl genpkey -algorithm ed25519 -out ed25519.key
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out p256.key
for k in ed25519 p256 signer; do openssl pkey -in $k.key -pubout -out $k.pub; done
# PostgreSQL over TLS (shared/tests/core/postgres.rs): a root of its own and the test server's certificate, for
# localhost and 127.0.0.1; ./test.sh starts its throwaway server with it (ssl = on).
openssl req -x509 -newkey rsa:2048 -nodes -keyout postgres-root.key -out postgres-root.pem -days $days \
  -subj "/CN=webhook-inbox test PostgreSQL root" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign"
openssl req -newkey rsa:2048 -nodes -keyout postgres-server.key -out postgres-server.csr -subj "/CN=localhost"
printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" "extendedKeyUsage=serverAuth" \
  > postgres-server.ext
openssl x509 -req -in postgres-server.csr -CA postgres-root.pem -CAkey postgres-root.key -CAcreateserial \
  -out postgres-server.pem -days $days -extfile postgres-server.ext
rm -f postgres-server.csr postgres-server.ext postgres-root.key *.srl
