#!/usr/bin/env bash
# Installs versitygw v1.8.0, the S3 server the object-store tests of
# tableformat/storage/s3store run against, into $(go env GOPATH)/bin (or
# $GOBIN). Idempotent: does nothing when that version is already there.
# The build takes about 6 minutes of a contended 2-core machine.
#
# Prints the path of the binary on its last line; the tests find it on
# PATH, in $(go env GOPATH)/bin, or through TSFLIGHT_VERSITYGW.
set -euo pipefail

VERSION=v1.8.0
BIN_DIR="$(go env GOBIN)"
if [ -z "$BIN_DIR" ]; then
  BIN_DIR="$(go env GOPATH)/bin"
fi
BIN="$BIN_DIR/versitygw"

# versitygw --version says "git" when built by go install; the module
# version recorded in the binary is what tells.
if [ -x "$BIN" ] && go version -m "$BIN" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/versity/versitygw[[:space:]]+$VERSION([[:space:]]|$)"; then
  echo "versitygw $VERSION already installed"
else
  echo "installing versitygw $VERSION (go install, a few minutes)"
  # Outside the module: versitygw has its own go.mod; -mod=mod keeps a
  # GOFLAGS=-mod=vendor or readonly setting from refusing it.
  (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSION")
fi
go version -m "$BIN" | grep -E "^[[:space:]]+mod[[:space:]]"
echo "$BIN"
