package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkaNames are the constants whose Kafka name is not their Go name in upper snake case.
var kafkaNames = map[string]string{
	"ErrInvalidTopic":        "INVALID_TOPIC_EXCEPTION",
	"ErrNotLeaderOrFollower": "NOT_LEADER_FOR_PARTITION", // kerr keeps the former name
}

// TestErrorCodesAreKafkas: every error code constant in errors.go has the number franz-go's
// kerr gives the Kafka error of the same name.
func TestErrorCodesAreKafkas(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			name := vs.Names[0].Name
			code := literal(t, vs.Values[0])
			n++
			if name == "ErrNone" {
				if code != 0 {
					t.Errorf("ErrNone = %d", code)
				}
				continue
			}
			want, ok := kafkaNames[name]
			if !ok {
				want = upperSnake(strings.TrimPrefix(name, "Err"))
			}
			e := kerr.TypedErrorForCode(int16(code))
			if e == nil || e.Message != want {
				t.Errorf("%s = %d, which kerr names %v; want %s", name, code, e, want)
			}
		}
	}
	if n < 60 {
		t.Fatalf("checked %d constants: errors.go was not read as expected", n)
	}
}

func literal(t *testing.T, e ast.Expr) int {
	t.Helper()
	sign := 1
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		sign, e = -1, u.X
	}
	v, err := strconv.Atoi(e.(*ast.BasicLit).Value)
	if err != nil {
		t.Fatal(err)
	}
	return sign * v
}

// upperSnake turns UnknownTopicID into UNKNOWN_TOPIC_ID.
func upperSnake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}
