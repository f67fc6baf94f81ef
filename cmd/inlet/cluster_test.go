package main

import (
	"strings"
	"testing"

	"inlet/server"
)

// TestClusterNodesRefusesBadLists: --cluster-nodes is checked at start, each error naming
// what is wrong.
func TestClusterNodesRefusesBadLists(t *testing.T) {
	for _, tc := range []struct {
		name, v string
		nodeID  int
		bucket  bool
		want    string
	}{
		{"without a bucket", "1@a:9092,2@b:9092", 1, false, "needs --s3-bucket"},
		{"own id missing", "2@a:9092,3@b:9092", 1, true, "does not list this node's --node-id 1"},
		{"duplicate id", "1@a:9092,1@b:9092", 1, true, "node id 1 is listed twice"},
		{"duplicate address", "1@a:9092,2@a:9092", 1, true, "a:9092 is listed twice"},
		{"no id", "a:9092", 1, true, "is not id@host:port"},
		{"bad id", "x@a:9092", 1, true, `node id "x"`},
		{"negative id", "-1@a:9092", 1, true, `node id "-1"`},
		{"no port", "1@a", 1, true, "missing port"},
		{"bad port", "1@a:99999", 1, true, `port "99999"`},
		{"port 0", "1@a:0", 1, true, `port "0"`},
		{"no host", "1@:9092", 1, true, "no host"},
		{"empty entry", "1@a:9092,", 1, true, "is not id@host:port"},
	} {
		_, err := parseClusterNodes(tc.v, tc.nodeID, tc.bucket)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q: error %v, want one containing %q", tc.name, tc.v, err, tc.want)
		}
	}
}

// TestClusterNodesParses: a good list, IPv6 included, in its order; empty is none.
func TestClusterNodesParses(t *testing.T) {
	got, err := parseClusterNodes(" 2@10.0.0.2:9092, 1@[::1]:9093 ", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []server.Node{{ID: 2, Host: "10.0.0.2", Port: 9092}, {ID: 1, Host: "::1", Port: 9093}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if nodeAddr(got[1]) != "[::1]:9093" {
		t.Errorf("addr %q", nodeAddr(got[1]))
	}
	if got, err := parseClusterNodes("", 1, false); got != nil || err != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
}
