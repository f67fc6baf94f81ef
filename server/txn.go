package server

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/server/authz"
	"inlet/server/txnapi"
	"inlet/txn"
)

// The node is its own transaction coordinator (FindCoordinator with key type 1 names it).
// Transaction state lives in package txn; this file wires it to the batch log (markers, the
// check before a partition's first transactional batch) and to the group coordinator
// (offsets committed in a transaction). The handlers are package server/txnapi's (22
// InitProducerId, 24, 25, 26, 28, 65 and 66), registered here at init like every API: their
// versions, their declarations (a filter runs on the node's txnapi.Server) and a handler
// that calls theirs with it. They are served by the same dispatch (handle.go) and counted by
// the same metrics.
func init() {
	for _, a := range txnapi.APIs() {
		register(api{key: a.Key, min: a.Min, max: a.Max,
			handle: func(s *Server, r *request, req kmsg.Request) (kmsg.Response, error) {
				return a.Handle(&s.txnAPI, s.txnRequest(r), req)
			},
			authz: authz.Adapt(a.Authz, txnAPIOf)})
	}
}

// txnAPIOf is the parts s gives the transaction APIs, which their filters run on.
func txnAPIOf(s *Server) *txnapi.Server { return &s.txnAPI }

// txnRequest is r as a transaction API's handler sees it.
func (s *Server) txnRequest(r *request) *txnapi.Request {
	return &txnapi.Request{
		Subject:    s.subjectOf(r),
		AdmitGroup: func(group string, creates bool) (bool, bool) { return s.admitGroup(r, group, creates) },
		OwnGroup:   func(group string, existed bool) { s.ownGroup(r, group, existed) },
	}
}

// transactionMaxTimeout is transaction.max.timeout.ms's default.
const transactionMaxTimeout = 15 * time.Minute

// loadTxns builds the transaction coordinator on the catalog, before the log opens (the log
// takes it: Txns). It reads its records, and its markers go to the log and its offsets to the
// group coordinator, once startTxns has started it: after a node restored from the bucket has
// written the records the bucket holds into the catalog (package diskless).
func (s *Server) loadTxns() error {
	var store txn.Store = s.meta
	if s.cfg.TxnStore != nil {
		store = s.cfg.TxnStore(s.meta)
	}
	c, err := txn.New(txn.Config{
		Store:        store,
		MaxTimeout:   transactionMaxTimeout,
		IDExpiration: s.cfg.TransactionalIDExpiration,
		WriteMarkers: s.writeMarkers,
		CommitOffsets: func(group string, offsets []txn.PendingOffset) error {
			now := time.Now().UnixMilli()
			m := make(map[meta.OffsetKey]meta.CommittedOffset, len(offsets))
			at := make(map[meta.OffsetKey]int64, len(offsets))
			for _, o := range offsets {
				k := meta.OffsetKey{Topic: o.Topic, Partition: o.Partition}
				m[k] = meta.CommittedOffset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: now}
				at[k] = o.At
			}
			return s.groups.ApplyTxnOffsets(group, m, at)
		},
		Logger: s.log,
	})
	if err != nil {
		return err
	}
	s.txns = c
	return nil
}

// startTxns loads and starts the transaction coordinator on the log (Start has set s.blog),
// then the groups' offset expiry, which asks it about pending offsets.
func (s *Server) startTxns() error {
	if err := s.txns.Load(); err != nil {
		return err
	}
	s.txns.Start()
	s.txnAPI = txnapi.Server{Log: s.blog, Txns: s.txns, Groups: s.groups, Logger: s.log}
	s.groups.Start()
	return nil
}

// writeMarkers appends a marker to each partition in one request and waits until they are
// durable. A partition of a topic deleted since it was added is skipped.
func (s *Server) writeMarkers(ctx context.Context, producerID int64, epoch int16, outcome txn.Marker, parts []txn.TopicPartition) error {
	now := time.Now().UnixMilli()
	kind := batchlog.AbortMarker
	if outcome == txn.CommitMarker {
		kind = batchlog.CommitMarker
	}
	req := &batchlog.Request{}
	for _, tp := range parts {
		t, ok := s.blog.Topic(tp.Topic)
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		req.Appends = append(req.Appends, batchlog.MarkerAppend(t.Partitions[tp.Partition], producerID, epoch, kind, 0, now))
	}
	if len(req.Appends) == 0 {
		return nil
	}
	// A Completion, not Done: on a diskless partition the log hands the markers to the
	// diskless commit log, and the request is answered once they are in the bucket.
	done := make(markersDone)
	req.Completion = done
	s.blog.Submit(req)
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, a := range req.Appends {
		if a.Err != 0 {
			return fmt.Errorf("marker on %s-%d: error %d", a.Partition.Topic, a.Partition.Index, a.Err)
		}
	}
	return nil
}

// markersDone is writeMarkers' batchlog.Completion: closed once the markers are durable
// (in the bucket, on a diskless partition) or refused.
type markersDone chan struct{}

func (d markersDone) Completed(*batchlog.Request) { close(d) }

// closeCoordinators stops the transaction coordinator's timeouts, then the groups.
func (s *Server) closeCoordinators() {
	if s.txns != nil {
		s.txns.Close()
	}
	if s.groups != nil { // nil until Start loads them
		s.groups.Close()
	}
}
