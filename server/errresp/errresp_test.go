package errresp

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// covered is every API key For answers.
var covered = []int16{
	0,  // Produce
	1,  // Fetch
	2,  // ListOffsets
	8,  // OffsetCommit
	9,  // OffsetFetch
	10, // FindCoordinator
	11, // JoinGroup
	12, // Heartbeat
	13, // LeaveGroup
	14, // SyncGroup
	15, // DescribeGroups
	16, // ListGroups
	19, // CreateTopics
	20, // DeleteTopics
	21, // DeleteRecords
	22, // InitProducerId
	23, // OffsetForLeaderEpoch
	24, // AddPartitionsToTxn
	25, // AddOffsetsToTxn
	26, // EndTxn
	28, // TxnOffsetCommit
	29, // DescribeAcls
	30, // CreateAcls
	31, // DeleteAcls
	32, // DescribeConfigs
	33, // AlterConfigs
	35, // DescribeLogDirs
	37, // CreatePartitions
	42, // DeleteGroups
	43, // ElectLeaders
	44, // IncrementalAlterConfigs
	45, // AlterPartitionReassignments
	46, // ListPartitionReassignments
	47, // OffsetDelete
	48, // DescribeClientQuotas
	49, // AlterClientQuotas
	50, // DescribeUserScramCredentials
	51, // AlterUserScramCredentials
	57, // UpdateFeatures
	60, // DescribeCluster
	61, // DescribeProducers
	65, // DescribeTransactions
	66, // ListTransactions
	68, // ConsumerGroupHeartbeat
	69, // ConsumerGroupDescribe
}

// answers are the response lists with an error field that a broker fills with what it finds,
// not one entry per entry of the request: an error answer leaves them empty.
var answers = map[string]bool{
	"DescribeLogDirsResponse.Dirs":          true,
	"DeleteACLsResponseResult.MatchingACLs": true,
}

const code = 6 // NOT_LEADER_OR_FOLLOWER

// TestEveryCoveredRequestGetsItsErrorEverywhere: for every covered key at every version kmsg
// knows, a request naming one of each entry (topic, partition, group, id, resource, user) is
// answered at its version with the code in every error field and an entry for each of its
// entries, and the answer encodes and decodes again carrying the code.
func TestEveryCoveredRequestGetsItsErrorEverywhere(t *testing.T) {
	for _, key := range covered {
		max := kmsg.RequestForKey(key).MaxVersion()
		for v := int16(0); v <= max; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			fill(reflect.ValueOf(req).Elem())
			name := kmsg.NameForKey(key)
			resp := For(req, code)
			if resp == nil {
				t.Errorf("%s v%d: no response", name, v)
				continue
			}
			if resp.Key() != key || resp.GetVersion() != v {
				t.Errorf("%s v%d: response key %d version %d", name, v, resp.Key(), resp.GetVersion())
			}
			var other []int16
			walk(t, reflect.ValueOf(resp).Elem(), name+" v"+itoa(v), func(c int16) {
				if c != code {
					other = append(other, c)
				}
			})
			if len(other) > 0 {
				t.Errorf("%s v%d: error fields %v, want every one %d", name, v, other, code)
			}

			wire := resp.AppendTo(nil)
			back := kmsg.ResponseForKey(key)
			back.SetVersion(v)
			if err := back.ReadFrom(wire); err != nil {
				t.Errorf("%s v%d: the encoded response does not decode: %v", name, v, err)
				continue
			}
			n := 0
			walk(nil, reflect.ValueOf(back).Elem(), "", func(c int16) {
				if c == code {
					n++
				} else if c != 0 {
					t.Errorf("%s v%d: decoded error field %d", name, v, c)
				}
			})
			if n == 0 && !(key == 35 && v < 3) { // DescribeLogDirs has no field for it before v3
				t.Errorf("%s v%d: the encoded response carries no error %d", name, v, code)
			}
		}
	}
}

// TestUncoveredRequestsGetNil: the requests a node answers with what it knows get nil.
func TestUncoveredRequestsGetNil(t *testing.T) {
	for _, key := range []int16{3, 17, 18, 36} { // Metadata, SaslHandshake, ApiVersions, SaslAuthenticate
		if resp := For(kmsg.RequestForKey(key), code); resp != nil {
			t.Errorf("%s: got %T, want nil", kmsg.NameForKey(key), resp)
		}
	}
}

// fill gives every list of v one entry, every string "x", recursively.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Name != "UnknownTags" && v.Type().Field(i).Name != "Version" {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("x"))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.String:
		v.SetString("x")
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.String {
			s := "x"
			v.Set(reflect.ValueOf(&s))
		}
	}
}

// walk calls f with every ErrorCode field under v and, when t is set, fails for a list with
// entries that have error fields left empty (a request entry without its answer).
func walk(t *testing.T, v reflect.Value, where string, f func(int16)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walk(t, v.Elem(), where, f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			fd := v.Type().Field(i)
			if fd.Name == "ErrorCode" {
				f(int16(v.Field(i).Int()))
				continue
			}
			fv := v.Field(i)
			if t != nil && fv.Kind() == reflect.Slice && fv.Len() == 0 && hasErrorCode(fv.Type().Elem()) &&
				!answers[v.Type().Name()+"."+fd.Name] {
				t.Errorf("%s: %s.%s is empty", where, v.Type().Name(), fd.Name)
			}
			walk(t, fv, where, f)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walk(t, v.Index(i), where, f)
		}
	}
}

// hasErrorCode tells whether a value of type typ holds an ErrorCode field.
func hasErrorCode(typ reflect.Type) bool {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return false
	}
	for i := range typ.NumField() {
		fd := typ.Field(i)
		if fd.Name == "ErrorCode" {
			return true
		}
		if fd.Type.Kind() == reflect.Slice && hasErrorCode(fd.Type.Elem()) {
			return true
		}
	}
	return false
}

func itoa(v int16) string { return string(rune('0'+v/10)) + string(rune('0'+v%10)) }
