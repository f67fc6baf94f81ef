// Package crashtest checks Inlet's durability promises against the real binary: TestMain
// builds cmd/inlet (with -race when the tests run with -race), and every test runs it as a
// subprocess on a loopback port and kills it (SIGKILL, SIGTERM) in the middle of real produce
// traffic. Everything lives in the _test files; this file only names the package.
//
// What is checked (Inlet's crash model: no acknowledged record lost, exactly once for
// idempotent producers), on both storage layouts
// (--storage segments and pebble) where the layout matters:
//   - no acknowledged record is lost across kill -9 and restart (plain producers: at least
//     once), and no high watermark a client saw goes back;
//   - idempotent producers get exactly once across kill -9: a batch that was stored before the
//     crash and is retried after it is answered with its original offsets, never stored twice;
//   - a captured produce request replayed byte for byte after a restart is a duplicate, and the
//     recovered producer window still refuses a sequence gap;
//   - SIGTERM drains: everything acknowledged is durable, a request half read when the signal
//     came is finished, and the process exits 0;
//   - producer ids are never handed out twice, even across kill -9;
//   - the metrics listener (metrics_test.go) serves /metrics with the values a produce implies,
//     /healthz and /readyz, pprof only with --pprof, and a real Prometheus scraping a node
//     under load counts exactly the records the load generator had acknowledged;
//   - hostile clients (hostile_test.go) cannot make the node hold memory beyond its in-flight
//     budget (slowloris frames before and without authentication, 1,000 idle connections),
//     idle connections are closed, connection limits refuse, and a stray command-line
//     argument stops start-up.
//
// Beyond durability: three nodes behind HAProxy routed by TLS server name (sni_test.go: the
// deployment of docs/operations.md's "Many nodes behind one address"), and the deployment
// files in deploy/ (deploy_test.go).
//
// Under -race, a data race the node reports in its log fails the test that ran it.
package crashtest
