package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/quota"
	"inlet/server/authz"
	"inlet/server/read"
	"inlet/wire"
)

// Fetch v4-v12. v4 brings isolation levels and the last stable offset, v5 the log start
// offset, v7 fetch sessions (KIP-227: refused cleanly by always answering session id 0, which
// clients take as "no session" and keep sending full requests), v9 the current leader epoch (KIP-320,
// checked against Config.LeaderEpoch: read.CheckLeaderEpoch), v11 rack ids (ignored: one
// node serves every partition, no follower fetching), v12 the flexible encoding. v13+ addresses topics by id and is not advertised.
//
// A fetch returns whole stored batches from the fetch offset, from both tiers, bounded by the
// high watermark (or the last stable offset for read_committed), and waits up to
// MaxWaitMillis for MinBytes: package read builds, waits for and encodes the answer
// (read.Reader.Fetch, read.Reply). This file decodes, authorizes and throttles the request.
// A fetch waits holding no in-flight budget: its frame is given back before the first wait
// (fetchPoll.Shed: Request.Shed), and its connection is not read meanwhile
// (conn.Handler.Holds).
const fetchKey = 1

func init() {
	register(api{key: fetchKey, min: 4, max: 12, serve: serveFetch,
		authz: before(authorizeFetch, onTopics(acl.Read))})
}

// serveFetch serves a Fetch as dispatch serves a kmsg API (decode, the authorization filter,
// the handler, metrics), except that the answer is a read.Reply, encoded by itself.
func serveFetch(s *Server, r *request, a *api) {
	kreq, ok := s.decode(r)
	if !ok {
		return
	}
	deny, answered := s.filter(r, a, kreq)
	if answered {
		return
	}
	reply := handleFetch(s, r, kreq.(*kmsg.FetchRequest))
	if deny != nil {
		deny(reply.Resp)
	}
	if m := s.m; m != nil {
		m.ResponseErrors(fetchKey, reply.Resp)
	}
	s.respond(r, reply.Encode(r.hdr))
}

func handleFetch(s *Server, r *request, req *kmsg.FetchRequest) *read.Reply {
	if ms := r.c.Throttled(quota.Fetch, r.hdr.ClientID); ms > 0 {
		// Its user is over the consumer_byte_rate (other connections took it there): answered
		// empty, as Kafka answers a throttled fetch.
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ThrottleMillis = ms
		return s.reader.NewReply(resp)
	}
	reply, bytes := s.reader.Fetch(req, (*fetchPoll)(r))
	reply.Resp.ThrottleMillis = r.c.Throttle(quota.Fetch, r.hdr.ClientID, bytes)
	return reply
}

// fetchPoll is a Fetch's request as its long poll sees it (read.Poll).
type fetchPoll request

func (r *fetchPoll) ReplyRoom() int64 { return r.t.Conn().ReplyRoom() }

func (r *fetchPoll) Shed() { r.s.shed((*request)(r)) }

func (r *fetchPoll) Gone() <-chan struct{} { return r.c.Done() }

// authorizeFetch: READ on each topic (KafkaApis.handleFetchRequest); refused partitions are
// answered without records.
func authorizeFetch(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FetchRequest)
	var denied []kmsg.FetchRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.FetchRequestTopic) bool { return p.Topic(acl.Read, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.FetchResponse) // serveFetch passes its reply's
		for _, t := range denied {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			for _, pt := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
				rp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null set
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
