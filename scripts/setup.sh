#!/usr/bin/env bash
# Installs what the tests need beyond Go and the module proxy: kcat (Debian's package), a C
# compiler for confluent-kafka-go's cgo build, systemd-analyze for the service unit, and
# Prometheus for crashtest's scrape test and HAProxy for the SNI-routing test (Debian's
# packages), and versitygw, the S3 server objstore's tests start on loopback (go install).
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail
need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd) # checks deploy/inlet.service
command -v prometheus >/dev/null 2>&1 || need+=(prometheus) # scrapes a node in crashtest/metrics_test.go
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy) # crashtest/sni_test.go
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
go mod download
# objstore/objtest looks for versitygw on PATH, then in $(go env GOPATH)/bin.
if ! command -v versitygw >/dev/null 2>&1 && [ ! -x "$(go env GOPATH)/bin/versitygw" ]; then
  echo "setup: installing versitygw"
  go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi
