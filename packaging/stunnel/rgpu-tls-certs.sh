#!/bin/sh
# Makes the certificates of rgpu's TLS mode with openssl: one private CA,
# a certificate for each GPU host's stunnel, one for each client.
#
#   rgpu-tls-certs.sh ca DIR              DIR/ca.crt, DIR/ca.key
#   rgpu-tls-certs.sh server DIR HOST     DIR/server.crt, DIR/server.key
#   rgpu-tls-certs.sh client DIR NAME     DIR/NAME.crt, DIR/NAME.key
#
# server and client sign with DIR/ca.key.  Keep ca.key off the GPU host and
# the clients: it is what makes a certificate valid.  Keys are EC P-256 and
# written mode 0600.  Validity: RGPU_TLS_DAYS days (default 825; the CA
# gets ten times that).  Steps: docs/tls.md
# (/usr/share/doc/rgpu-server/tls.md when installed).
set -eu

usage() {
    sed -n '5,7p' "$0" | sed 's/^# *//' >&2
    exit 2
}
[ $# -ge 2 ] || usage
what=$1
dir=$2
days=${RGPU_TLS_DAYS:-825}
mkdir -p "$dir"
umask 077

newkey() {  # newkey KEYFILE CSRFILE SUBJECT
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "$3" -keyout "$1" -out "$2" 2>/dev/null
}

sign() {    # sign CSRFILE CRTFILE EXTENSIONS
    ext=$dir/.ext.$$
    printf '%s\n' "$3" >"$ext"
    openssl x509 -req -in "$1" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
        -CAcreateserial -days "$days" -sha256 -extfile "$ext" -out "$2" 2>/dev/null
    rm -f "$ext" "$1"
    chmod 644 "$2"
}

case $what in
ca)
    [ $# -eq 2 ] || usage
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -days $((days * 10)) -subj "/CN=rgpu CA" \
        -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    chmod 644 "$dir/ca.crt"
    echo "$dir/ca.crt: the rgpu CA (copy it to every GPU host and client)"
    echo "$dir/ca.key: its key (keep it here, private)"
    ;;
server)
    [ $# -eq 3 ] || usage
    host=$3
    case $host in
    *[!0-9.]*) san="DNS:$host" ;;
    *) san="IP:$host" ;;
    esac
    newkey "$dir/server.key" "$dir/server.csr" "/CN=$host"
    sign "$dir/server.csr" "$dir/server.crt" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san"
    echo "$dir/server.crt, $dir/server.key: for the stunnel in front of rgpud on $host"
    ;;
client)
    [ $# -eq 3 ] || usage
    name=$3
    newkey "$dir/$name.key" "$dir/$name.csr" "/CN=$name"
    sign "$dir/$name.csr" "$dir/$name.crt" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
    echo "$dir/$name.crt, $dir/$name.key: for the client stunnel of $name"
    ;;
*)
    usage
    ;;
esac
