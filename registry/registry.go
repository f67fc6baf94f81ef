// Package registry serves the node's configured schemas over HTTP as a read-only,
// Confluent-compatible schema registry (the REST API of Confluent Schema Registry, in the
// shapes franz-go's pkg/sr client and Confluent's serializers read). Producers using Confluent
// serializers with auto.register.schemas=false and use.latest.version=true find their schema
// ids here; with auto-registration on, registering a schema that is already configured
// answers its id, and registering anything else is refused with Confluent's read-only error
// (HTTP 422, error_code 42205), as a registry in READONLY mode does.
package registry

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"inlet/httplimit"
	"inlet/schema"
)

// Confluent error codes (io.confluent.kafka.schemaregistry.rest.exceptions.Errors).
const (
	codeSubjectNotFound       = 40401
	codeVersionNotFound       = 40402
	codeSchemaNotFound        = 40403
	codeSubjectCompatNotFound = 40408
	codeSubjectModeNotFound   = 40409
	codeInvalidSchema         = 42201
	codeInvalidVersion        = 42202
	codeOperationNotPermitted = 42205
	codeJSONParse             = 50005
)

// contentType is Confluent's media type; clients also accept application/json.
const contentType = "application/vnd.schemaregistry.v1+json"

// maxBody bounds a request body (a posted schema).
const maxBody = 4 << 20

// Handler returns the registry's HTTP handler for reg (nil: no schemas).
func Handler(reg *schema.Registry) http.Handler {
	if reg == nil {
		reg, _ = schema.New(nil, nil)
	}
	h := &handler{reg: reg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { respond(w, 200, map[string]any{}) })
	mux.HandleFunc("GET /subjects", h.subjects)
	mux.HandleFunc("GET /subjects/{subject}/versions", h.versions)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", h.version)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}/schema", h.versionSchema)
	mux.HandleFunc("POST /subjects/{subject}", h.lookup)
	mux.HandleFunc("POST /subjects/{subject}/versions", h.register)
	mux.HandleFunc("GET /schemas/ids/{id}", h.byID)
	mux.HandleFunc("GET /schemas/ids/{id}/schema", h.byIDSchema)
	mux.HandleFunc("GET /schemas/ids/{id}/versions", h.idVersions)
	mux.HandleFunc("GET /schemas/ids/{id}/subjects", h.idSubjects)
	mux.HandleFunc("GET /schemas/types", func(w http.ResponseWriter, _ *http.Request) {
		respond(w, 200, []string{"AVRO", "JSON"})
	})
	mux.HandleFunc("GET /config", func(w http.ResponseWriter, _ *http.Request) {
		respond(w, 200, map[string]string{"compatibilityLevel": "NONE"})
	})
	mux.HandleFunc("GET /config/{subject}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("defaultToGlobal") == "true" {
			respond(w, 200, map[string]string{"compatibilityLevel": "NONE"})
			return
		}
		fail(w, 404, codeSubjectCompatNotFound, "Subject '"+r.PathValue("subject")+"' does not have subject-level compatibility configured")
	})
	mux.HandleFunc("GET /mode", func(w http.ResponseWriter, _ *http.Request) {
		respond(w, 200, map[string]string{"mode": "READONLY"})
	})
	mux.HandleFunc("GET /mode/{subject}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("defaultToGlobal") == "true" {
			respond(w, 200, map[string]string{"mode": "READONLY"})
			return
		}
		fail(w, 404, codeSubjectModeNotFound, "Subject '"+r.PathValue("subject")+"' does not have subject-level mode configured")
	})
	// Every other write is refused the way a READONLY registry refuses it.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.NotFound(w, r)
			return
		}
		fail(w, 422, codeOperationNotPermitted, "This schema registry is read-only: its schemas come from the Inlet node's configuration")
	})
	return mux
}

type handler struct{ reg *schema.Registry }

// subjectSchema is Confluent's Schema shape (SubjectVersion + id + schema). schemaType is
// omitted for AVRO, as Confluent does.
type subjectSchema struct {
	Subject    string `json:"subject,omitempty"`
	Version    int    `json:"version,omitempty"`
	ID         int    `json:"id"`
	SchemaType string `json:"schemaType,omitempty"`
	Schema     string `json:"schema"`
}

func shape(s *schema.Schema, withSubject bool) subjectSchema {
	out := subjectSchema{ID: s.ID, Schema: s.Text}
	if s.Type != schema.Avro {
		out.SchemaType = string(s.Type)
	}
	if withSubject {
		out.Subject, out.Version = s.Subject, s.Version
	}
	return out
}

func respond(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func fail(w http.ResponseWriter, status, code int, msg string) {
	respond(w, status, map[string]any{"error_code": code, "message": msg})
}

func (h *handler) subject(w http.ResponseWriter, r *http.Request) (*schema.Subject, bool) {
	name := r.PathValue("subject")
	sub, ok := h.reg.Subject(name)
	if !ok {
		fail(w, 404, codeSubjectNotFound, "Subject '"+name+"' not found.")
	}
	return sub, ok
}

func (h *handler) subjects(w http.ResponseWriter, _ *http.Request) {
	respond(w, 200, h.reg.Subjects())
}

func (h *handler) versions(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subject(w, r)
	if !ok {
		return
	}
	vs := make([]int, 0, len(sub.Versions))
	for _, v := range sub.Versions {
		vs = append(vs, v.Version)
	}
	respond(w, 200, vs)
}

// pickVersion resolves {version}: a positive number, "latest" or -1.
func (h *handler) pickVersion(w http.ResponseWriter, r *http.Request) (*schema.Schema, bool) {
	sub, ok := h.subject(w, r)
	if !ok {
		return nil, false
	}
	v := r.PathValue("version")
	if v == "latest" || v == "-1" {
		return sub.Latest(), true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		fail(w, 422, codeInvalidVersion, "The specified version '"+v+"' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"")
		return nil, false
	}
	s, ok := sub.Version(n)
	if !ok {
		fail(w, 404, codeVersionNotFound, "Version "+v+" not found.")
	}
	return s, ok
}

func (h *handler) version(w http.ResponseWriter, r *http.Request) {
	if s, ok := h.pickVersion(w, r); ok {
		respond(w, 200, shape(s, true))
	}
}

func (h *handler) versionSchema(w http.ResponseWriter, r *http.Request) {
	if s, ok := h.pickVersion(w, r); ok {
		raw(w, s.Text)
	}
}

// raw answers a schema's text itself (Confluent's /schema endpoints).
func raw(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(200)
	_, _ = io.WriteString(w, text)
}

func (h *handler) id(w http.ResponseWriter, r *http.Request) (*schema.Schema, bool) {
	v := r.PathValue("id")
	n, err := strconv.Atoi(v)
	if err == nil {
		if s, ok := h.reg.ByID(n); ok {
			return s, true
		}
	}
	fail(w, 404, codeSchemaNotFound, "Schema "+v+" not found")
	return nil, false
}

func (h *handler) byID(w http.ResponseWriter, r *http.Request) {
	if s, ok := h.id(w, r); ok {
		respond(w, 200, shape(s, false))
	}
}

func (h *handler) byIDSchema(w http.ResponseWriter, r *http.Request) {
	if s, ok := h.id(w, r); ok {
		raw(w, s.Text)
	}
}

func (h *handler) idVersions(w http.ResponseWriter, r *http.Request) {
	s, ok := h.id(w, r)
	if !ok {
		return
	}
	type sv struct {
		Subject string `json:"subject"`
		Version int    `json:"version"`
	}
	out := []sv{}
	for _, u := range h.reg.SubjectsOf(s.ID) {
		out = append(out, sv{u.Subject, u.Version})
	}
	respond(w, 200, out)
}

func (h *handler) idSubjects(w http.ResponseWriter, r *http.Request) {
	s, ok := h.id(w, r)
	if !ok {
		return
	}
	seen := map[string]bool{}
	out := []string{}
	for _, u := range h.reg.SubjectsOf(s.ID) {
		if !seen[u.Subject] {
			seen[u.Subject] = true
			out = append(out, u.Subject)
		}
	}
	sort.Strings(out)
	respond(w, 200, out)
}

// posted is the body of POST /subjects/{s} and /subjects/{s}/versions.
type posted struct {
	Schema     string            `json:"schema"`
	SchemaType string            `json:"schemaType"`
	References []json.RawMessage `json:"references"`
	ID         int               `json:"id"`
	Version    int               `json:"version"`
}

func (h *handler) readPosted(w http.ResponseWriter, r *http.Request) (posted, bool) {
	var p posted
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(&p); err != nil {
		fail(w, 500, codeJSONParse, "Unrecognized request body: "+err.Error())
		return p, false
	}
	if p.Schema == "" {
		fail(w, 422, codeInvalidSchema, "Empty schema")
		return p, false
	}
	p.SchemaType = strings.ToUpper(p.SchemaType)
	if p.SchemaType == "" {
		p.SchemaType = string(schema.Avro)
	}
	return p, true
}

// lookup is POST /subjects/{s}: is this schema registered under s?
func (h *handler) lookup(w http.ResponseWriter, r *http.Request) {
	p, ok := h.readPosted(w, r)
	if !ok {
		return
	}
	if _, ok := h.subject(w, r); !ok {
		return
	}
	if _, err := schema.Canonical(schema.Type(p.SchemaType), p.Schema); err != nil {
		fail(w, 422, codeInvalidSchema, fmt.Sprintf("Invalid schema: %v", err))
		return
	}
	if len(p.References) == 0 {
		if s, ok := h.reg.Find(r.PathValue("subject"), schema.Type(p.SchemaType), p.Schema); ok {
			respond(w, 200, shape(s, true))
			return
		}
	}
	fail(w, 404, codeSchemaNotFound, "Schema not found")
}

// register is POST /subjects/{s}/versions: the id of an already registered schema, or the
// read-only refusal.
func (h *handler) register(w http.ResponseWriter, r *http.Request) {
	p, ok := h.readPosted(w, r)
	if !ok {
		return
	}
	name := r.PathValue("subject")
	if _, ok := h.reg.Subject(name); ok {
		if _, err := schema.Canonical(schema.Type(p.SchemaType), p.Schema); err != nil {
			fail(w, 422, codeInvalidSchema, fmt.Sprintf("Invalid schema: %v", err))
			return
		}
		if len(p.References) == 0 {
			if s, ok := h.reg.Find(name, schema.Type(p.SchemaType), p.Schema); ok && (p.ID <= 0 || p.ID == s.ID) {
				respond(w, 200, map[string]int{"id": s.ID})
				return
			}
		}
	}
	fail(w, 422, codeOperationNotPermitted, "Subject "+name+" is in read-only mode: this registry serves only the schemas in the Inlet node's configuration")
}

// Server is a running registry.
type Server struct {
	hs *http.Server
	ln net.Listener
}

// Start serves reg on addr (host:port; port 0 picks one) over plain HTTP.
func Start(addr string, reg *schema.Registry) (*Server, error) { return StartTLS(addr, reg, nil) }

// StartTLS serves reg on addr over HTTPS with cfg (its certificates; HTTP/2 is offered), or
// over plain HTTP when cfg is nil, with httplimit.Default's timeouts and connection cap.
// Behind an SNI-routing proxy (package haproxy) the certificate must name the node's
// <node>.<domain>.
func StartTLS(addr string, reg *schema.Registry, cfg *tls.Config) (*Server, error) {
	return StartWith(addr, reg, cfg, httplimit.Default)
}

// StartWith is StartTLS with the given limits.
func StartWith(addr string, reg *schema.Registry, cfg *tls.Config, lim httplimit.Limits) (*Server, error) {
	ln, err := lim.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("registry: listen %s: %w", addr, err)
	}
	hs := lim.Server(Handler(reg))
	hs.TLSConfig = cfg
	s := &Server{ln: ln, hs: hs}
	if cfg == nil {
		go func() { _ = s.hs.Serve(ln) }()
	} else {
		go func() { _ = s.hs.ServeTLS(ln, "", "") }() // the certificates are in cfg
	}
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the registry, letting requests in progress finish until ctx ends.
func (s *Server) Close(ctx context.Context) error { return s.hs.Shutdown(ctx) }
