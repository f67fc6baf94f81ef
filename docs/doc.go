// Package docs holds the tests that keep Inlet's pages true: the README's quickstart run
// against a fresh node (quickstart_test.go), and every relative link and #anchor of
// README.md, docs/**/*.md and DESIGN.md resolved inside the repository (links_test.go). The
// pages' tables are checked where the code they describe lives: the flags and config keys in
// cmd/inlet, the metrics in metrics, the API table in server; they find the pages through
// Root and File (repo.go), this package's only non-test code.
package docs
