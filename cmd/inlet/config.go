package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"inlet/auth"
	"inlet/config"
	"inlet/conn"
	"inlet/registry"
	"inlet/schema"
	"inlet/server"
)

// security is what the config file adds beyond flags: its settings, and the user directory
// and schema registry built from them (Users, built from Settings.Users, hides that field).
type security struct {
	*config.Settings
	Users    *auth.Users
	Schemas  *schema.Registry // nil when no schema is configured
	explicit map[string]bool  // flags given on the command line
}

// buildSecurity builds the objects the config file's settings describe: the user directory
// (always, when there is a file: a file without users has an empty one) and the schema
// registry (only when the file has schemas or topic bindings).
func buildSecurity(s *config.Settings) (*auth.Users, *schema.Registry, error) {
	users, err := auth.NewUsers(s.Users)
	if err != nil {
		return nil, nil, fmt.Errorf("users: %w", err)
	}
	if !s.HasSchemas() {
		return users, nil, nil
	}
	reg, err := schema.New(s.SchemaDefs, s.SchemaBindings)
	if err != nil {
		return nil, nil, fmt.Errorf("schemas/topics: %w", err)
	}
	return users, reg, nil
}

// loadSecurity reads a config file's structured sections into settings and builds their
// objects; getenv is os.Getenv outside tests.
func loadSecurity(f *config.File, getenv func(string) string) (*config.Settings, *auth.Users, *schema.Registry, error) {
	s, err := f.Resolve(getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	users, reg, err := buildSecurity(s)
	if err != nil {
		return nil, nil, nil, err
	}
	return s, users, reg, nil
}

// applyConfig loads the --config file (if any): each flag key it sets becomes the flag's
// value unless the flag was given explicitly on the command line (defaults < file < flags).
// A bad file stops start-up with the key and the problem.
func applyConfig(fs *flag.FlagSet, path string) security {
	sec := security{Settings: &config.Settings{}, explicit: map[string]bool{}}
	fs.Visit(func(f *flag.Flag) { sec.explicit[f.Name] = true })
	if path == "" {
		return sec
	}
	f, err := config.Load(path)
	if err != nil {
		usage("%v", err)
	}
	vals, err := f.FlagValues()
	if err != nil {
		usage("config %s: %v", path, err)
	}
	for name, v := range vals {
		if sec.explicit[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			usage("config %s: %s: %v", path, strings.ReplaceAll(name, "-", "_"), err)
		}
	}
	if sec.Settings, sec.Users, sec.Schemas, err = loadSecurity(f, os.Getenv); err != nil {
		usage("config %s: %v", path, err)
	}
	return sec
}

// listeners maps the file's listeners to the server's. Without any, the server serves the
// --listen/--advertise PLAINTEXT listener. With them, an explicit --listen (or --advertise)
// replaces the first listener's address (or advertised address).
func (sec security) listeners(listen, advertise string) []conn.Listener {
	var out []conn.Listener
	for i, l := range sec.Listeners {
		sl := conn.Listener{Name: l.Name, Address: l.Address, Advertise: l.Advertise, Protocol: l.Protocol, Mechanisms: l.Mechanisms, TLS: l.TLS, Anonymous: l.Anonymous}
		if i == 0 && sec.explicit["listen"] {
			sl.Address = listen
		}
		if i == 0 && sec.explicit["advertise"] {
			sl.Advertise = advertise
		}
		out = append(out, sl)
	}
	return out
}

func startRegistry(logger *slog.Logger, addr string, reg *schema.Registry, tlsCfg *tls.Config) func(context.Context) {
	if addr == "" {
		if tlsCfg != nil {
			logger.Warn("registry_tls is set but the schema registry is not served (no registry_listen)")
		}
		return func(context.Context) {}
	}
	rs, err := registry.StartTLS(addr, reg, tlsCfg)
	if err != nil {
		logger.Error("schema registry", "err", err)
		os.Exit(1)
	}
	logger.Info("schema registry listening (read-only)", "addr", rs.Addr(), "tls", tlsCfg != nil)
	return func(ctx context.Context) { _ = rs.Close(ctx) }
}

// scramCommand is `inlet scram [--iterations N]`: it reads a password from stdin and prints
// SCRAM-SHA-256 and SCRAM-SHA-512 credentials for a users entry of the config file.
func scramCommand(args []string) int {
	fs := flag.NewFlagSet("scram", flag.ExitOnError)
	iters := fs.Int("iterations", auth.DefaultIterations, "PBKDF2 iterations")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: inlet scram [--iterations N] < password-file\nprints scram_sha_256 and scram_sha_512 entries for a user in the config file")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		fmt.Fprintln(os.Stderr, "inlet scram: no password on stdin", err)
		return 2
	}
	for _, m := range []struct{ key, mech string }{{"scram_sha_256", auth.ScramSHA256}, {"scram_sha_512", auth.ScramSHA512}} {
		c, err := auth.NewCredential(m.mech, password, *iters)
		if err != nil {
			fmt.Fprintln(os.Stderr, "inlet scram:", err)
			return 2
		}
		b := base64.StdEncoding.EncodeToString
		fmt.Printf("    %s:\n      salt: %s\n      iterations: %d\n      stored_key: %s\n      server_key: %s\n", m.key, b(c.Salt), c.Iterations, b(c.StoredKey), b(c.ServerKey))
	}
	return 0
}

// reloadUsers is SIGHUP: the config file's users (credentials and prefixes) are read again and
// take effect without dropping connections; a removed user's connections are closed. Nothing
// else in the file is reloaded. A file that does not load changes nothing (logged).
func reloadUsers(logger *slog.Logger, srv *server.Server, path string) {
	if path == "" {
		logger.Warn("SIGHUP: no --config file to reload")
		return
	}
	f, err := config.Load(path)
	var users *auth.Users
	if err == nil {
		_, users, _, err = loadSecurity(f, os.Getenv)
	}
	if err == nil {
		err = srv.ReloadUsers(users)
	}
	if err != nil {
		logger.Error("SIGHUP: users not reloaded", "config", path, "err", err)
		return
	}
	logger.Info("SIGHUP: users reloaded", "config", path, "users", len(users.All()))
}
