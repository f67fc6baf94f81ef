// Package schema binds topics to value (and optionally key) schemas and validates produced
// records against them before they are stored: Avro (parsed by hamba/avro) and JSON Schema
// (santhosh-tekuri/jsonschema), both in Confluent's wire format — a zero magic byte, the
// schema id as a big-endian int32, then the payload (the serializers of Confluent's clients
// and franz-go's pkg/sr write exactly this).
//
// The same Registry serves the read-only schema registry (package registry): subjects, their
// versions, and ids. Ids are either set in the configuration or derived from the schema's
// canonical text (so they are stable across restarts and across reordering of the
// configuration); the same schema under two subjects has one id, as in Confluent's registry.
package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"inlet/wire"
)

// Type is a schema type as Confluent's registry names it (schemaType).
type Type string

const (
	Avro Type = "AVRO"
	JSON Type = "JSON"
)

// Def is one configured schema version.
type Def struct {
	Subject string
	Type    Type   // default Avro
	Text    string // the schema as written
	ID      int    // 0: derived from the canonical text
	Version int    // 0: one more than the subject's previous version
}

// Binding binds a topic to subjects; either may be empty.
type Binding struct {
	Topic        string
	KeySubject   string
	ValueSubject string
}

// Schema is one registered schema version.
type Schema struct {
	ID        int
	Subject   string
	Version   int
	Type      Type
	Text      string
	Canonical string // Avro Parsing Canonical Form, or compact JSON

	avro *avroNode
	json *jsonschema.Schema
}

// Subject is a named, versioned sequence of schemas.
type Subject struct {
	Name     string
	Versions []*Schema // ascending by version
}

// Topic is a topic's binding, resolved.
type Topic struct {
	Name       string
	Key, Value *Subject
}

// Registry holds every configured schema; it is read-only once built and safe for concurrent
// use.
type Registry struct {
	subjects map[string]*Subject
	byID     map[int]*Schema // first definition of each id (the same schema may be in several subjects)
	topics   map[string]*Topic
}

// New parses and compiles defs and resolves bindings. Errors name the subject and version.
func New(defs []Def, bindings []Binding) (*Registry, error) {
	r := &Registry{subjects: map[string]*Subject{}, byID: map[int]*Schema{}, topics: map[string]*Topic{}}
	for i, d := range defs {
		if d.Subject == "" {
			return nil, fmt.Errorf("schema %d: no subject", i)
		}
		sc, err := compile(d)
		if err != nil {
			return nil, fmt.Errorf("subject %s: %w", d.Subject, err)
		}
		sub := r.subjects[d.Subject]
		if sub == nil {
			sub = &Subject{Name: d.Subject}
			r.subjects[d.Subject] = sub
		}
		if sc.Version == 0 {
			sc.Version = 1
			if n := len(sub.Versions); n > 0 {
				sc.Version = sub.Versions[n-1].Version + 1
			}
		}
		for _, v := range sub.Versions {
			if v.Version == sc.Version {
				return nil, fmt.Errorf("subject %s: version %d defined twice", d.Subject, sc.Version)
			}
			if v.Type == sc.Type && v.Canonical == sc.Canonical {
				return nil, fmt.Errorf("subject %s: version %d repeats version %d", d.Subject, sc.Version, v.Version)
			}
		}
		if sc.ID == 0 {
			sc.ID = derivedID(sc.Type, sc.Canonical)
		}
		if prev, ok := r.byID[sc.ID]; ok && (prev.Type != sc.Type || prev.Canonical != sc.Canonical) {
			return nil, fmt.Errorf("subject %s version %d: id %d is already the id of a different schema (subject %s version %d); set id explicitly", d.Subject, sc.Version, sc.ID, prev.Subject, prev.Version)
		}
		for _, other := range r.byID {
			if other.Type == sc.Type && other.Canonical == sc.Canonical && other.ID != sc.ID {
				return nil, fmt.Errorf("subject %s version %d: the same schema already has id %d (subject %s); one schema has one id", d.Subject, sc.Version, other.ID, other.Subject)
			}
		}
		if _, ok := r.byID[sc.ID]; !ok {
			r.byID[sc.ID] = sc
		}
		sub.Versions = append(sub.Versions, sc)
		sort.Slice(sub.Versions, func(a, b int) bool { return sub.Versions[a].Version < sub.Versions[b].Version })
	}
	for _, b := range bindings {
		if b.Topic == "" {
			return nil, errors.New("topic binding without a topic name")
		}
		if _, dup := r.topics[b.Topic]; dup {
			return nil, fmt.Errorf("topic %s bound twice", b.Topic)
		}
		t := &Topic{Name: b.Topic}
		for _, s := range []struct {
			name string
			dst  **Subject
		}{{b.KeySubject, &t.Key}, {b.ValueSubject, &t.Value}} {
			if s.name == "" {
				continue
			}
			sub, ok := r.subjects[s.name]
			if !ok {
				return nil, fmt.Errorf("topic %s: subject %s is not defined", b.Topic, s.name)
			}
			*s.dst = sub
		}
		if t.Key == nil && t.Value == nil {
			return nil, fmt.Errorf("topic %s: binding names no subject", b.Topic)
		}
		r.topics[b.Topic] = t
	}
	return r, nil
}

// derivedID maps a schema to a positive int32 from the SHA-256 of its type and canonical
// text: stable across restarts and independent of the configuration's order.
func derivedID(t Type, canonical string) int {
	h := sha256.Sum256([]byte(string(t) + "\x00" + canonical))
	id := int(binary.BigEndian.Uint32(h[:4]) & 0x7fffffff)
	if id == 0 {
		id = 1
	}
	return id
}

func compile(d Def) (*Schema, error) {
	sc := &Schema{ID: d.ID, Subject: d.Subject, Version: d.Version, Type: d.Type, Text: d.Text}
	if sc.Type == "" {
		sc.Type = Avro
	}
	if d.ID < 0 || d.Version < 0 {
		return nil, fmt.Errorf("negative id or version")
	}
	canonical, err := Canonical(sc.Type, d.Text)
	if err != nil {
		return nil, err
	}
	sc.Canonical = canonical
	switch sc.Type {
	case Avro:
		as, err := avro.ParseWithCache(d.Text, "", &avro.SchemaCache{})
		if err != nil {
			return nil, fmt.Errorf("avro schema: %w", err)
		}
		if sc.avro, err = compileAvro(as); err != nil {
			return nil, err
		}
	case JSON:
		c := jsonschema.NewCompiler()
		c.UseLoader(noLoader{})
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(d.Text))
		if err != nil {
			return nil, fmt.Errorf("json schema: %w", err)
		}
		url := fmt.Sprintf("inlet:///%s/%d.json", d.Subject, d.Version)
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("json schema: %w", err)
		}
		if sc.json, err = c.Compile(url); err != nil {
			return nil, fmt.Errorf("json schema: %w", err)
		}
	default:
		return nil, fmt.Errorf("schema type %q is not AVRO or JSON", sc.Type)
	}
	return sc, nil
}

// Canonical is the form two schemas are compared in: Avro's Parsing Canonical Form, or the
// JSON text compacted.
func Canonical(t Type, text string) (string, error) {
	switch t {
	case Avro, "":
		as, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			return "", fmt.Errorf("avro schema: %w", err)
		}
		return as.String(), nil
	case JSON:
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(text)); err != nil {
			return "", fmt.Errorf("json schema: %w", err)
		}
		return buf.String(), nil
	}
	return "", fmt.Errorf("schema type %q is not AVRO or JSON", t)
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s: only self-contained schemas are served", url)
}

// Subjects lists subject names, sorted.
func (r *Registry) Subjects() []string {
	out := make([]string, 0, len(r.subjects))
	for n := range r.subjects {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Subject returns a subject by name.
func (r *Registry) Subject(name string) (*Subject, bool) {
	s, ok := r.subjects[name]
	return s, ok
}

// ByID returns the schema with id.
func (r *Registry) ByID(id int) (*Schema, bool) {
	s, ok := r.byID[id]
	return s, ok
}

// SubjectsOf lists every (subject, version) that holds schema id, sorted.
func (r *Registry) SubjectsOf(id int) []*Schema {
	var out []*Schema
	for _, n := range r.Subjects() {
		for _, v := range r.subjects[n].Versions {
			if v.ID == id {
				out = append(out, v)
			}
		}
	}
	return out
}

// Find returns the version of subject whose schema equals text (compared canonically).
func (r *Registry) Find(subject string, t Type, text string) (*Schema, bool) {
	sub, ok := r.subjects[subject]
	if !ok {
		return nil, false
	}
	if t == "" {
		t = Avro
	}
	c, err := Canonical(t, text)
	if err != nil {
		return nil, false
	}
	for _, v := range sub.Versions {
		if v.Type == t && v.Canonical == c {
			return v, true
		}
	}
	return nil, false
}

// Topic returns the binding of topic name, or nil; it does not allocate.
func (r *Registry) Topic(name []byte) *Topic {
	if r == nil || len(r.topics) == 0 {
		return nil
	}
	return r.topics[string(name)]
}

// Latest is the subject's highest version.
func (s *Subject) Latest() *Schema { return s.Versions[len(s.Versions)-1] }

// Version returns version v of the subject.
func (s *Subject) Version(v int) (*Schema, bool) {
	for _, sc := range s.Versions {
		if sc.Version == v {
			return sc, true
		}
	}
	return nil, false
}

func (s *Subject) byID(id int) *Schema {
	for _, sc := range s.Versions {
		if sc.ID == id {
			return sc
		}
	}
	return nil
}

// Validate checks one serialized datum (magic byte, id, payload) against the subject: the id
// must be one of its versions' and the payload must decode under that version.
func (s *Subject) Validate(data []byte) error {
	if len(data) < 5 {
		return fmt.Errorf("%d bytes, shorter than the 5-byte Confluent wire-format header", len(data))
	}
	if data[0] != 0 {
		return fmt.Errorf("magic byte %d, want 0 (Confluent wire format)", data[0])
	}
	id := int(int32(binary.BigEndian.Uint32(data[1:5])))
	sc := s.byID(id)
	if sc == nil {
		return fmt.Errorf("schema id %d is not registered under subject %s", id, s.Name)
	}
	payload := data[5:]
	switch sc.Type {
	case Avro:
		if err := validateAvro(sc.avro, payload); err != nil {
			return fmt.Errorf("does not decode as Avro schema id %d: %w", id, err)
		}
	case JSON:
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
		if err != nil {
			return fmt.Errorf("is not JSON (schema id %d): %w", id, err)
		}
		if err := sc.json.Validate(v); err != nil {
			return fmt.Errorf("does not match JSON schema id %d: %s", id, oneLine(err.Error()))
		}
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// RecordError is one record of a batch that failed validation.
type RecordError struct {
	Index   int32 // the record's position in its batch
	Message string
}

// maxRecordErrors bounds the per-record errors reported for one batch (the response, and the
// work on a batch that is failing anyway).
const maxRecordErrors = 100

// ValidateBatch decompresses batch (a magic-2 batch already checked by
// wire.ValidateProduceBatch) and validates every record's key and value against the topic's
// subjects. A null key or value (a tombstone) is not checked: Confluent's deserializers read
// null as null. It appends the failing records to errs and returns the possibly grown
// scratch (see wire.ForEachRecord). A batch whose records do not even parse yields one error
// for index 0 and the wire error code in code (0 otherwise).
func (t *Topic) ValidateBatch(batch, scratch []byte, errs []RecordError) ([]byte, []RecordError, int16) {
	var i int32
	scratch, err := wire.ForEachRecord(batch, scratch, func(rec wire.Record) error {
		idx := i
		i++
		if len(errs) >= maxRecordErrors {
			return nil
		}
		if t.Key != nil && rec.Key != nil {
			if err := t.Key.Validate(rec.Key); err != nil {
				errs = append(errs, RecordError{Index: idx, Message: fmt.Sprintf("record %d: key %v", idx, err)})
				return nil
			}
		}
		if t.Value != nil && rec.Value != nil {
			if err := t.Value.Validate(rec.Value); err != nil {
				errs = append(errs, RecordError{Index: idx, Message: fmt.Sprintf("record %d: value %v", idx, err)})
			}
		}
		return nil
	})
	if err != nil {
		code := wire.RecordsErrorCode(err)
		if code == wire.ErrNone {
			code = wire.ErrInvalidRecord
		}
		errs = append(errs, RecordError{Index: 0, Message: err.Error()})
		return scratch, errs, code
	}
	return scratch, errs, 0
}
