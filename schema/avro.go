package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/hamba/avro/v2"
)

// Avro validation. hamba/avro parses the schema (names, namespaces, references, defaults,
// and the Parsing Canonical Form the registry compares); validating a payload then walks the
// compiled schema over the Avro binary encoding (Avro specification, "Binary Encoding")
// without building any value, so a valid record costs no allocation. The walk accepts
// exactly what hamba/avro's decoder accepts into a generic value, plus one rule of its own: the
// datum must use the whole payload, since trailing bytes mean the record was written with a
// different schema than its id names (FuzzAvroAgreesWithHamba checks both directions).

type avroKind uint8

const (
	avroNull avroKind = iota
	avroBoolean
	avroInt
	avroLong
	avroFloat
	avroDouble
	avroBytes
	avroString
	avroEnum
	avroFixed
	avroArray
	avroMap
	avroUnion
	avroRecord
)

var kindNames = [...]string{"null", "boolean", "int", "long", "float", "double", "bytes", "string", "enum", "fixed", "array", "map", "union", "record"}

// avroNode is one compiled schema node. Named types referenced more than once (and recursive
// types) share one node.
type avroNode struct {
	kind     avroKind
	n        int // enum: number of symbols; fixed: size
	name     string
	children []*avroNode // record: fields; union: branches; array, map: [items]
	fields   []string    // record: field names, for error messages
}

// maxAvroDepth bounds the nesting of a datum (a recursive schema can nest as deep as its
// payload is long; each level costs a Go stack frame).
const maxAvroDepth = 512

// maxBlockItems bounds one array or map block's item count beyond the bytes left: items of a
// zero-size type (null, empty record) take no bytes, so a count alone could loop for 2^63
// iterations.
const maxBlockItems = 1 << 16

func compileAvro(s avro.Schema) (*avroNode, error) {
	return compileAvroNode(s, map[string]*avroNode{})
}

func compileAvroNode(s avro.Schema, named map[string]*avroNode) (*avroNode, error) {
	switch t := s.(type) {
	case *avro.RefSchema:
		return compileAvroNode(t.Schema(), named)
	case *avro.NullSchema:
		return &avroNode{kind: avroNull}, nil
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Null:
			return &avroNode{kind: avroNull}, nil
		case avro.Boolean:
			return &avroNode{kind: avroBoolean}, nil
		case avro.Int:
			return &avroNode{kind: avroInt}, nil
		case avro.Long:
			return &avroNode{kind: avroLong}, nil
		case avro.Float:
			return &avroNode{kind: avroFloat}, nil
		case avro.Double:
			return &avroNode{kind: avroDouble}, nil
		case avro.Bytes:
			return &avroNode{kind: avroBytes}, nil
		case avro.String:
			return &avroNode{kind: avroString}, nil
		}
	case *avro.EnumSchema:
		if n, ok := named[t.FullName()]; ok {
			return n, nil
		}
		n := &avroNode{kind: avroEnum, n: len(t.Symbols()), name: t.FullName()}
		named[t.FullName()] = n
		return n, nil
	case *avro.FixedSchema:
		if n, ok := named[t.FullName()]; ok {
			return n, nil
		}
		n := &avroNode{kind: avroFixed, n: t.Size(), name: t.FullName()}
		named[t.FullName()] = n
		return n, nil
	case *avro.ArraySchema:
		items, err := compileAvroNode(t.Items(), named)
		if err != nil {
			return nil, err
		}
		return &avroNode{kind: avroArray, children: []*avroNode{items}}, nil
	case *avro.MapSchema:
		values, err := compileAvroNode(t.Values(), named)
		if err != nil {
			return nil, err
		}
		return &avroNode{kind: avroMap, children: []*avroNode{values}}, nil
	case *avro.UnionSchema:
		n := &avroNode{kind: avroUnion}
		for _, b := range t.Types() {
			c, err := compileAvroNode(b, named)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
		}
		return n, nil
	case *avro.RecordSchema:
		if n, ok := named[t.FullName()]; ok {
			return n, nil
		}
		// Registered before its fields are compiled, so a recursive reference finds it.
		n := &avroNode{kind: avroRecord, name: t.FullName()}
		named[t.FullName()] = n
		for _, f := range t.Fields() {
			c, err := compileAvroNode(f.Type(), named)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
			n.fields = append(n.fields, f.Name())
		}
		return n, nil
	}
	return nil, fmt.Errorf("schema: unsupported Avro schema %T (%s)", s, s.Type())
}

var avroStringNode = &avroNode{kind: avroString}

var (
	errAvroShort  = errors.New("payload ends inside the datum")
	errAvroVarint = errors.New("malformed varint")
	errAvroDepth  = errors.New("datum nested too deep")
)

// validateAvro checks that payload is exactly one datum of n.
func validateAvro(n *avroNode, payload []byte) error {
	rest, err := n.skip(payload, 0)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes left after the datum", len(rest))
	}
	return nil
}

// long reads a zig-zag varint of at most 10 bytes (Avro long).
func long(b []byte) (int64, []byte, error) {
	ux, n := binary.Uvarint(b)
	if n <= 0 {
		if n == 0 {
			return 0, nil, errAvroShort
		}
		return 0, nil, errAvroVarint
	}
	return int64(ux>>1) ^ -int64(ux&1), b[n:], nil
}

// int32v reads an Avro int: a zig-zag varint of at most 5 bytes whose value fits 32 bits.
func int32v(b []byte) (int64, []byte, error) {
	v, rest, err := long(b)
	if err != nil {
		return 0, nil, err
	}
	if len(b)-len(rest) > 5 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, nil, errAvroVarint
	}
	return v, rest, nil
}

func (n *avroNode) skip(b []byte, depth int) ([]byte, error) {
	if depth > maxAvroDepth {
		return nil, errAvroDepth
	}
	switch n.kind {
	case avroNull:
		return b, nil
	case avroBoolean:
		if len(b) < 1 {
			return nil, errAvroShort
		}
		if b[0] > 1 {
			return nil, fmt.Errorf("boolean byte %d", b[0])
		}
		return b[1:], nil
	case avroInt, avroEnum:
		v, rest, err := int32v(b)
		if err != nil {
			return nil, err
		}
		if n.kind == avroEnum && (v < 0 || v >= int64(n.n)) {
			return nil, fmt.Errorf("enum %s index %d out of range [0, %d)", n.name, v, n.n)
		}
		return rest, nil
	case avroLong:
		_, rest, err := long(b)
		return rest, err
	case avroFloat:
		if len(b) < 4 {
			return nil, errAvroShort
		}
		return b[4:], nil
	case avroDouble:
		if len(b) < 8 {
			return nil, errAvroShort
		}
		return b[8:], nil
	case avroBytes, avroString:
		l, rest, err := long(b)
		if err != nil {
			return nil, err
		}
		if l < 0 {
			return nil, fmt.Errorf("negative %s length %d", kindNames[n.kind], l)
		}
		if l > int64(len(rest)) {
			return nil, errAvroShort
		}
		return rest[l:], nil
	case avroFixed:
		if len(b) < n.n {
			return nil, errAvroShort
		}
		return b[n.n:], nil
	case avroUnion:
		i, rest, err := int32v(b)
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(n.children)) {
			return nil, fmt.Errorf("union branch %d out of range [0, %d)", i, len(n.children))
		}
		return n.children[i].skip(rest, depth+1)
	case avroRecord:
		var err error
		for i, f := range n.children {
			if b, err = f.skip(b, depth+1); err != nil {
				return nil, fieldError{field: n.fields[i], err: err}
			}
		}
		return b, nil
	case avroArray, avroMap:
		item := n.children[0]
		for {
			count, rest, err := long(b)
			if err != nil {
				return nil, err
			}
			b = rest
			if count == 0 {
				return b, nil
			}
			if count < 0 {
				// A negative count is followed by the block's size in bytes.
				if count == math.MinInt64 {
					return nil, errAvroVarint
				}
				count = -count
				size, rest, err := long(b)
				if err != nil {
					return nil, err
				}
				if size < 0 || size > int64(len(rest)) {
					return nil, fmt.Errorf("%s block size %d out of range", kindNames[n.kind], size)
				}
				b = rest
			}
			if count > int64(len(b))+maxBlockItems {
				return nil, fmt.Errorf("%s block of %d items in %d bytes", kindNames[n.kind], count, len(b))
			}
			for ; count > 0; count-- {
				if n.kind == avroMap {
					if b, err = avroStringNode.skip(b, depth+1); err != nil {
						return nil, fmt.Errorf("map key: %w", err)
					}
				}
				if b, err = item.skip(b, depth+1); err != nil {
					return nil, err
				}
			}
		}
	}
	panic(fmt.Sprintf("BUG: schema: avro node kind %d", n.kind))
}

// fieldError names the record field a failure sits in; nested fields join with dots.
type fieldError struct {
	field string
	err   error
}

func (e fieldError) Error() string {
	path, err := e.field, e.err
	for {
		inner, ok := err.(fieldError)
		if !ok {
			break
		}
		path, err = path+"."+inner.field, inner.err
	}
	return "field " + path + ": " + err.Error()
}

func (e fieldError) Unwrap() error { return e.err }
