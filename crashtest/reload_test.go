package crashtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// usersConfig writes a config with a SASL_PLAINTEXT listener on saslPort (PLAIN) and the named
// users, each with the password "<name>-secret" from a password file (read again on reload,
// unlike the environment of a running process) and the prefix "<name>.".
func usersConfig(t *testing.T, path string, saslPort int, users ...string) {
	t.Helper()
	cfg := fmt.Sprintf(`listeners:
  - name: plain
    address: 127.0.0.1:0
    security_protocol: PLAINTEXT
  - name: sasl
    address: 127.0.0.1:%d
    security_protocol: SASL_PLAINTEXT
    sasl_mechanisms: [PLAIN]
users:
`, saslPort)
	for _, u := range users {
		pwFile := filepath.Join(filepath.Dir(path), u+".password")
		if err := os.WriteFile(pwFile, []byte(u+"-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("  - name: %s\n    password_file: %s\n    topic_prefixes: [\"%s.\"]\n", u, pwFile, u)
	}
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// saslLogin opens a connection to addr and authenticates as user with PLAIN; the error says
// why it failed.
func saslLogin(t *testing.T, addr, user, pw string) (*rawConn, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("crashtest"))}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	rc.roundTrip(hs)
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.Version, sa.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pw)
	if r := rc.roundTrip(sa).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		return nil, fmt.Errorf("SaslAuthenticate: error %d", r.ErrorCode)
	}
	return rc, nil
}

// TestSIGHUPReloadsUsers: after the config file changes, SIGHUP makes its users current
// without dropping connections: a new user can log in, a removed user's connections are
// closed, and the others' traffic goes on, on the connections they had.
func TestSIGHUPReloadsUsers(t *testing.T) {
	saslPort := freePort(t)
	path := filepath.Join(t.TempDir(), "inlet.yaml")
	usersConfig(t, path, saslPort, "alice", "bob")
	n := startInlet(t, "--config", path)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(saslPort))
	alice, err := saslLogin(t, addr, "alice", "alice-secret")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := saslLogin(t, addr, "bob", "bob-secret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saslLogin(t, addr, "dave", "dave-secret"); err == nil {
		t.Fatal("dave logged in before being configured")
	}

	usersConfig(t, path, saslPort, "alice", "dave")
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	n.waitLogged("SIGHUP: users reloaded", 10*time.Second)

	if _, err := saslLogin(t, addr, "dave", "dave-secret"); err != nil {
		t.Errorf("dave after the reload: %v", err)
	}
	expectEOF(t, bob.c, 5*time.Second, "bob's connection after bob was removed")
	alice.apiVersions() // alice's connection lives on
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("alice.t")
	md.Topics = append(md.Topics, mt)
	md.AllowAutoTopicCreation = true
	if resp := alice.roundTrip(md).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode == 29 {
		t.Errorf("alice lost her prefix in the reload")
	}
	if _, err := saslLogin(t, addr, "bob", "bob-secret"); err == nil {
		t.Error("bob logged in after being removed")
	}
}
