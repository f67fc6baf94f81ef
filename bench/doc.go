// Package bench is Inlet's benchmark harness, run by cmd/bench (`make bench`, `make chaos`):
// it drives brokers from outside, as processes over TCP, and records what it measured.
//
// The path of a measurement: every run starts a fresh broker process (inlet, kfake through
// cmd/kfake-broker, or any --peer command) on a fresh data directory and a free loopback port
// (bench/proc), waits until it accepts, drives it with loadgen.Run in this process, reads the
// broker's CPU time, peak RSS and disk writes from /proc just before stopping it with SIGTERM
// (Env.measureThen in runner.go), and keeps the run, failed or not, in a result file:
// results/<kind>-<time>.json plus a row per run in results/<kind>.csv (result.go). Medians and
// ratios are computed from the runs (Summarize). Rendering those files into BENCHMARKS.md and
// its SVG charts is bench/report's; `bench profile` is bench/profile's and `bench rebalance`
// (group rebalance times, text output only) bench/rebalance's; they use this package from
// above, and bench/human prints the numbers of this package, bench/report and bench/profile.
//
// A --peer given as `name[key=value,...]=command` carries topic configs: the harness creates
// the run's topic, and the consume phase's, with them before any client produces (topics.go).
// With remote.storage.enable=true the consume phase reads only once the broker's remote tier
// holds every batch of both topics and none is left on its disk (ListOffsets earliest-local at
// the high watermark): the catch-up is then a read of the remote tier alone.
//
// Brokers run as leaders of their own process groups (bench/proc): a shell wrapper and the
// broker it starts are signalled and measured together, and a terminal's Ctrl-C reaches the
// harness only, which then stops the broker itself and writes what it measured so far.
//
// `bench compare --consume` adds a consume phase to every run, on the same broker after the
// produce figures are read and before it is stopped (consume.go, consume_run.go; its Kafka
// clients are package bench/consume's): a flat-out fill of a topic of its own, a catch-up
// read of all of it by directly assigned kgo consumers (records/s and records per broker
// CPU-second), and a tail at a fixed rate that the same consumers follow, each value stamped
// with its send time (end-to-end latency, broker cores).
// The leader's ExitStats then include the phase; the produce figures do not.
//
// `bench scale` (scale.go) runs comparisons along one load dimension at a time (partitions,
// topics, producers, record size, compression) from a base point, a fresh broker per run; a
// built-in target's --default-partitions and a peer's {partitions} follow each point, and a
// point whose broker outgrew inlet's in-flight budget plus 256 MiB, or that failed a record,
// is flagged.
//
// Runs are interleaved so that drift of the machine spreads over every point: a sweep goes
// 1 2 4 8 16, 1 2 4 8 16, ...; a comparison A B C, A B C, ...; a scale point A B, A B, .... The
// chaos run (chaos.go) kills inlet with SIGKILL at gaps drawn uniformly from [0.5, 1.5] ×
// --kill-every while the producers send, restarts it on the same directory and port, and
// fails unless loadgen's read-back verification passes.
//
// Files: runner.go (Load, Env, one measured run, progress lines), sweep.go, compare.go,
// latency.go, scale.go, chaos.go (one subcommand each, with its terminal summary),
// consume.go (the consume phase's settings, shapes, figures and medians), consume_run.go (the
// phase itself: fill, catch-up, tail, the broker's /proc readings around them; the readers
// and tail producers are bench/consume's), result.go (result files, CSV rows, Summarize),
// stats.go (median and ratio), topics.go (topics created with a peer's configs, the wait
// for the remote tier). This package takes no lock (bench/consume's tail producers each hold
// one, errMu, taken alone).
package bench
