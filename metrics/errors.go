package metrics

import (
	"reflect"
	"sync"
)

// Counting the error codes of a response, whatever its API. Kafka counts, for its
// ErrorsPerSec metric, every error a response carries: the top-level one and each topic's,
// partition's, group's or resource's (AbstractResponse.errorCounts, written out per response
// class). franz-go's kmsg responses all name those fields ErrorCode (int16), at any depth of
// nested structs and slices of structs, so one walk serves every API, new ones included, and
// cannot forget a level. Where the ErrorCode fields of a type are is worked out once per type
// with reflection and cached (errorPlan); a walk then only follows those paths. This runs
// for every API but Produce, whose path counts its partitions' codes itself and allocates
// nothing.

// errorPlan lists where the ErrorCode fields of one struct type are.
type errorPlan []errorStep

type errorStep struct {
	field int
	kind  reflect.Kind // Int16: the code itself; Struct, Pointer, Slice: descend with sub
	sub   *errorPlan
}

var plans sync.Map // reflect.Type (a struct) -> *errorPlan

// eachErrorCode calls fn with every non-zero ErrorCode in resp (a pointer to a struct).
func eachErrorCode(resp any, fn func(int16)) {
	v := reflect.ValueOf(resp)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	planFor(v.Type()).walk(v, fn)
}

func planFor(t reflect.Type) *errorPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*errorPlan)
	}
	p := buildPlan(t, map[reflect.Type]bool{})
	plans.Store(t, p)
	return p
}

// buildPlan finds t's ErrorCode fields and the fields that lead to more. A type is not
// descended into again while its own plan is being built (no Kafka message contains itself;
// this only keeps a recursive type from recursing forever).
func buildPlan(t reflect.Type, building map[reflect.Type]bool) *errorPlan {
	p := new(errorPlan)
	if building[t] {
		return p
	}
	building[t] = true
	defer delete(building, t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		ft := f.Type
		switch {
		case f.Name == "ErrorCode" && ft.Kind() == reflect.Int16:
			*p = append(*p, errorStep{field: i, kind: reflect.Int16})
		case ft.Kind() == reflect.Struct:
			if sub := buildPlan(ft, building); len(*sub) > 0 {
				*p = append(*p, errorStep{field: i, kind: reflect.Struct, sub: sub})
			}
		case (ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice) && ft.Elem().Kind() == reflect.Struct:
			if sub := buildPlan(ft.Elem(), building); len(*sub) > 0 {
				*p = append(*p, errorStep{field: i, kind: ft.Kind(), sub: sub})
			}
		}
	}
	return p
}

func (p *errorPlan) walk(v reflect.Value, fn func(int16)) {
	for _, s := range *p {
		f := v.Field(s.field)
		switch s.kind {
		case reflect.Int16:
			if c := int16(f.Int()); c != 0 {
				fn(c)
			}
		case reflect.Struct:
			s.sub.walk(f, fn)
		case reflect.Pointer:
			if !f.IsNil() {
				s.sub.walk(f.Elem(), fn)
			}
		case reflect.Slice:
			for i := 0; i < f.Len(); i++ {
				s.sub.walk(f.Index(i), fn)
			}
		}
	}
}
