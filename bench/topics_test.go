package bench

import (
	"bytes"
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/bench/proc"
	"inlet/objstore"
	"inlet/objstore/objtest"
)

func TestParsePeerTopicConfigs(t *testing.T) {
	for _, c := range []struct {
		spec    string
		name    string
		configs map[string]string
		cmd     string
	}{
		{"a=x {port}", "a", nil, "x {port}"},
		{"a[k=v]=x {port}", "a", map[string]string{"k": "v"}, "x {port}"},
		{" t [remote.storage.enable=true, local.retention.bytes=0] = x {port} --flag=[y]", "t",
			map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "0"}, "x {port} --flag=[y]"},
		{"a=x {port} [k=v]", "a", nil, "x {port} [k=v]"}, // brackets after the '=' are the command's
		{"a[k=]=x {port}", "a", map[string]string{"k": ""}, "x {port}"},
	} {
		p, err := ParsePeer(c.spec)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if p.Name != c.name || p.Argv[2] != c.cmd || !maps.Equal(p.TopicConfigs, c.configs) {
			t.Errorf("%q: name %q, command %q, configs %v; want %q, %q, %v", c.spec, p.Name, p.Argv[2], p.TopicConfigs, c.name, c.cmd, c.configs)
		}
	}
}

func TestParsePeerRefusesBadTopicConfigs(t *testing.T) {
	for _, spec := range []string{
		"a[k=v=x {port}",      // no ']'
		"a[k=v]x=y {port}",    // text between ']' and '='
		"a[]=x {port}",        // an empty pair
		"a[k]=x {port}",       // no value
		"a[=v]=x {port}",      // no key
		"a[k=1,k=2]=x {port}", // twice
		"a[k=v]=x",            // no {port}
		"[k=v]=x {port}",      // no name
	} {
		if p, err := ParsePeer(spec); err == nil {
			t.Errorf("%q accepted: %+v", spec, p)
		}
	}
}

// FuzzParsePeer: ParsePeer never panics; what it accepts has a name free of separators and
// brackets, a command with {port}, and topic config keys that are not empty; and a spec
// written back from an accepted target parses to the same target.
func FuzzParsePeer(f *testing.F) {
	for _, s := range []string{"a=x {port}", "a[k=v,l=w]=x {port} {dir}", "a[k=v=x {port}", "[=]=", "a[k=v]] =x{port}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeer(s)
		if err != nil {
			return
		}
		if p.Name == "" || strings.ContainsAny(p.Name, " \t/|[]=") || !strings.Contains(p.Argv[2], "{port}") {
			t.Fatalf("%q accepted as %+v", s, p)
		}
		spec := p.Name
		if p.TopicConfigs != nil {
			spec += "[" + configText(p.TopicConfigs) + "]"
		}
		for k, v := range p.TopicConfigs {
			if k == "" || strings.ContainsAny(k, ",=[] \t") || strings.ContainsAny(v, ",]") {
				t.Fatalf("%q accepted with config %q=%q", s, k, v)
			}
		}
		q, err := ParsePeer(spec + "=" + p.Argv[2])
		if err != nil || q.Name != p.Name || q.Argv[2] != p.Argv[2] || !maps.Equal(q.TopicConfigs, p.TopicConfigs) {
			t.Fatalf("%q: re-parsed %+v, %v; first %+v", s, q, err, p)
		}
	})
}

func TestOffsetsOfRefusesMissingAndFailedPartitions(t *testing.T) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	for p := range int32(2) {
		pp := kmsg.NewListOffsetsRequestTopicPartition()
		pp.Partition = p
		rt.Partitions = append(rt.Partitions, pp)
	}
	req.Topics = append(req.Topics, rt)
	answer := func(codes ...int16) *kmsg.ListOffsetsResponse {
		resp := kmsg.NewPtrListOffsetsResponse()
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = "t"
		for p, code := range codes {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.Offset = int32(p), code, int64(10*p+5)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		return resp
	}
	got, err := offsetsOf(req, answer(0, 0))
	if err != nil || got[partitionKey{"t", 0}] != 5 || got[partitionKey{"t", 1}] != 15 || len(got) != 2 {
		t.Errorf("offsets %v, %v", got, err)
	}
	if _, err := offsetsOf(req, answer(0)); err == nil {
		t.Error("a partition missing from the answer passed")
	}
	if _, err := offsetsOf(req, answer(0, 6)); err == nil {
		t.Error("a partition answered with NOT_LEADER passed")
	}
}

// TestCompareConsumeTieredShort: a peer with remote.storage.enable has its topics created
// tiered on a versitygw; its catch-up waits until no batch is left on local disk and then
// reads every record from the remote tier; the same inlet without topic configs never waits.
func TestCompareConsumeTieredShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds inlet, starts versitygw and runs for about 20 s")
	}
	s3 := objtest.StartVersity(t)
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	build := exec.Command("go", "build", "-o", bins, "inlet/cmd/inlet")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	inlet := filepath.Join(bins, "inlet")
	tierFlags := " --s3-bucket " + s3.Bucket + " --s3-endpoint " + s3.Endpoint + " --s3-path-style --s3-prefix t/" +
		" --remote-upload-interval-ms 200 --remote-object-bytes 1MiB --log-retention-check-interval-ms 200"
	peer, err := ParsePeer("inlet-tier[remote.storage.enable=true,local.retention.bytes=0]=AWS_ACCESS_KEY_ID=" + s3.AccessKey +
		" AWS_SECRET_ACCESS_KEY=" + s3.SecretKey + " AWS_REGION=us-east-1 " + inlet +
		" --listen 127.0.0.1:{port} --data-dir {dir} --default-partitions 4" + tierFlags)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := Compare(ctx, CompareOptions{
		Env: Env{Root: root, ResultsDir: t.TempDir(), TmpDir: t.TempDir(), InletBin: inlet,
			Command: "go test -run " + t.Name(), Stdout: &stdout, Stderr: &stderr},
		Load:      Load{Producers: 2, Partitions: 4, RecordSize: 100, Idempotent: true, Duration: time.Second, MaxBufferedRecords: 2000},
		Repeat:    1,
		Targets:   []string{TargetInlet},
		InletArgs: []string{"--log-retention-check-interval-ms", "200"},
		Peers:     []proc.Target{peer},
		Consume: &ConsumeSettings{Shape: ShapePinned, FillRecords: 40_000, Consumers: 2, TailRate: 2_000, TailDuration: time.Second,
			Timeout: time.Minute},
	})
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Targets) != 2 || !maps.Equal(f.Targets[1].TopicConfigs, peer.TopicConfigs) {
		t.Errorf("the result file's targets %+v lack the topic configs", f.Targets)
	}
	for _, r := range f.Runs {
		c := r.Consume
		switch {
		case r.Error != "" || !c.OK():
			t.Errorf("%s: run %q, consume %+v", r.Target, r.Error, c)
		case c.Catchup.Records != 40_000:
			t.Errorf("%s: catch-up %+v", r.Target, c.Catchup)
		case r.Target == TargetInlet && (c.TierWaitSeconds != 0 || r.Tier != nil):
			t.Errorf("inlet without topic configs waited %v s for a tier, split %+v", c.TierWaitSeconds, r.Tier)
		case r.Target == "inlet-tier" && c.TierWaitSeconds == 0:
			t.Error("inlet-tier read without waiting for the tier")
		case r.Target == "inlet-tier" && (r.Tier == nil || uint64(r.Tier.RemoteOnlyRecords+r.Tier.LocalRecords) != r.Acked):
			t.Errorf("inlet-tier: split %+v (%s) of %d acknowledged records", r.Tier, r.TierError, r.Acked)
		}
	}
	if n := countObjects(t, s3.Open("t/")); n == 0 {
		t.Error("nothing was uploaded")
	}
}

// countObjects counts the objects of b.
func countObjects(t *testing.T, b objstore.Bucket) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	if err := b.List(ctx, "", func(string, int64) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
