// Package txn is the transaction coordinator: the state of every transactional id (Kafka's
// TransactionCoordinator and TransactionStateManager, with the classic protocol: no KIP-890
// epoch bump per transaction).
//
// A transactional id's record (producer id and epoch, state, timeout, partitions and groups
// added, pending offset commits) is written with a synced Pebble set (Store.SaveTxn) before any
// answer depends on it. A transaction ends in two durable steps, as Kafka's does:
//
//	EndTxn:  Ongoing --save--> PrepareCommit|PrepareAbort --markers, offsets--> Complete*
//
// The markers go through the batch log (Config.WriteMarkers) and the pending offsets to the
// group coordinator (Config.CommitOffsets). Once Prepare* is durable the outcome is decided:
// after a crash, or a failed marker write, the completion is retried until it succeeds
// (markers for a partition whose transaction already ended write nothing, so a retry is
// harmless). An Ongoing transaction survives a crash as it was; its producer can go on, end
// it, or be fenced by a new InitProducerId, and its timeout aborts it otherwise. A node
// restored from the bucket aborts it at start instead (Restored).
//
// The batch log asks Verify before it opens a transaction on a partition: only a partition
// the current epoch added while the transaction is Ongoing may be written transactionally.
//
// Locks: Coordinator.mu guards the map and each txn's published view (what Verify,
// Describe and List read); txn.op serialises the operations on one transactional id and is
// held across their I/O. mu is never held while waiting on I/O, and Verify (called on the
// log's committer) takes only mu, so an operation waiting for its markers never blocks it.
package txn

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"inlet/wire"
)

// State is a transaction's state, as Kafka's TransactionState names it.
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
)

// StateNames are Kafka's names of every transaction state, in TransactionState's order: the
// states here, then Dead and PrepareEpochFence, which this coordinator never enters
// (ListTransactions takes all of them as filters).
var StateNames = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string { return StateNames[s] }

// Marker is the kind of control batch that ends a transaction on each of its partitions.
type Marker uint8

const (
	AbortMarker Marker = iota + 1
	CommitMarker
)

// TopicPartition names a partition added to a transaction.
type TopicPartition struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

// PendingOffset is an offset committed inside a transaction (TxnOffsetCommit), applied to its
// group when the transaction commits.
type PendingOffset struct {
	Topic       string `json:"t"`
	Partition   int32  `json:"p"`
	Offset      int64  `json:"o"`
	LeaderEpoch int32  `json:"e"`
	Metadata    string `json:"m"`
	// At is when TxnOffsetCommit took it (unix ns): a plain OffsetCommit of the partition after
	// that wins over it when the transaction commits, as the later record does in Kafka.
	At int64 `json:"at"`
}

// record is a transactional id's durable state.
type record struct {
	ProducerID int64 `json:"pid"`
	Epoch      int16 `json:"epoch"`
	// The id and epoch before the last InitProducerId: a retried InitProducerId (KIP-360,
	// v3+) that names them gets the current ones back instead of being fenced.
	LastProducerID int64                      `json:"last_pid"`
	LastEpoch      int16                      `json:"last_epoch"`
	TimeoutMs      int32                      `json:"timeout_ms"`
	State          State                      `json:"state"`
	Partitions     []TopicPartition           `json:"partitions,omitempty"`
	Groups         []string                   `json:"groups,omitempty"`
	Offsets        map[string][]PendingOffset `json:"offsets,omitempty"`
	StartMs        int64                      `json:"start_ms"` // when it became Ongoing; -1 otherwise
	UpdateMs       int64                      `json:"update_ms"`
}

func (r *record) clone() *record {
	c := *r
	c.Partitions = slices.Clone(r.Partitions)
	c.Groups = slices.Clone(r.Groups)
	if r.Offsets != nil {
		c.Offsets = make(map[string][]PendingOffset, len(r.Offsets))
		for g, os := range r.Offsets {
			c.Offsets[g] = slices.Clone(os)
		}
	}
	return &c
}

func (r *record) hasPartition(tp TopicPartition) bool { return slices.Contains(r.Partitions, tp) }

// Store keeps transaction records durable (meta.Store implements it).
type Store interface {
	SaveTxn(id string, v []byte) error
	DeleteTxn(id string) error
	LoadTxns() (map[string][]byte, error)
	AllocateProducerID() (int64, error)
}

// Config wires the coordinator to the log and the group coordinator.
type Config struct {
	Store Store
	// MaxTimeout is transaction.max.timeout.ms: InitProducerId with a longer timeout is
	// INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// WriteMarkers appends a marker of kind for the producer at epoch to each partition and
	// returns once they are durable.
	WriteMarkers func(ctx context.Context, producerID int64, epoch int16, kind Marker, parts []TopicPartition) error
	// CommitOffsets applies a committed transaction's offsets to their group, durably.
	CommitOffsets func(group string, offsets []PendingOffset) error
	// CheckInterval is how often timeouts and unfinished completions are looked at
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms; 1 s when zero).
	CheckInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms (default 7 days): a transactional id
	// with no transaction open (Empty, CompleteCommit, CompleteAbort) and no change for this
	// long is forgotten, its record deleted (TransactionStateManager.removeExpiredTransactionalIds).
	// The time of the last change is stored in the record, so it counts across restarts.
	// Negative: never.
	IDExpiration time.Duration
	// IDExpirationCheckInterval is transactions.remove.expired.transaction.cleanup.interval.ms
	// (default 1 hour): how often the sweep looks for expired ids.
	IDExpirationCheckInterval time.Duration
	Logger                    *slog.Logger
	Now                       func() time.Time
}

// Kafka's defaults of transactional.id.expiration.ms and
// transactions.remove.expired.transaction.cleanup.interval.ms.
const (
	DefaultIDExpiration              = 7 * 24 * time.Hour
	DefaultIDExpirationCheckInterval = time.Hour
)

// Coordinator serves every transactional id of the node.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu   sync.RWMutex
	txns map[string]*txn
	// pending: for each group, the transactions holding offsets of it not yet ended.
	pending map[string]map[*txn]bool

	stop chan struct{}
	done sync.WaitGroup

	// Transactions ended since start, by outcome (metrics).
	commits, aborts, timeouts atomic.Int64
}

// Ended counts the transactions ended since start: "commit", "abort" (by its producer, or by a
// new producer with its id), "timeout".
func (c *Coordinator) Ended() map[string]int64 {
	return map[string]int64{"commit": c.commits.Load(), "abort": c.aborts.Load(), "timeout": c.timeouts.Load()}
}

type txn struct {
	id string
	op sync.Mutex // serialises operations on this id, held across their I/O
	// rec is the published state, replaced whole under Coordinator.mu; nil until the first
	// InitProducerId has been saved.
	rec *record
	// gone: the id expired and left the map (set under op and mu). An operation that took
	// t from the map before then and waited for op starts again from the map.
	gone bool
}

// New makes the coordinator; Load reads the stored transactions and Start completes those a
// crash left half-ended and starts the timeouts.
func New(cfg Config) (*Coordinator, error) {
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.IDExpiration == 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.IDExpirationCheckInterval <= 0 {
		cfg.IDExpirationCheckInterval = DefaultIDExpirationCheckInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Coordinator{cfg: cfg, log: cfg.Logger, txns: map[string]*txn{},
		pending: map[string]map[*txn]bool{}, stop: make(chan struct{})}, nil
}

// Load reads the stored transactions, once, before Start and before any request: after the
// catalog is complete, which on a node restored from the bucket is after the log opened
// (package diskless writes the records the bucket holds into it then), as Kafka's coordinator
// loads its partition of __transaction_state when it takes it over.
func (c *Coordinator) Load() error {
	stored, err := c.cfg.Store.LoadTxns()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, v := range stored {
		r := new(record)
		if err := json.Unmarshal(v, r); err != nil {
			// Not record data: the id starts again as a new one (its producer's next
			// InitProducerId gets a new producer id) rather than the node not starting.
			c.log.Error("txn: skipping a stored transactional id record that does not decode", "transactional_id", quote(id), "err", err)
			continue
		}
		t := &txn{id: id, rec: r}
		c.txns[id] = t
		c.indexPending(t, nil, r)
	}
	return nil
}

// Restored is the stored record v as a node restored from elsewhere (package diskless: a
// node rebuilt from the bucket) keeps it, where held is the node's own record of the id (nil:
// none). An Ongoing transaction the node does not hold open itself (the same producer id,
// epoch and start) becomes PrepareAbort at a bumped epoch, so that Start aborts it, writing
// its markers, and its producer is fenced, as when it times out: the node holds its batches
// only as far as they came back, which for a partition that is not diskless is not all of
// them. Other states are kept, a prepared one to be completed by Start. It returns the record
// and its producer id.
func Restored(v, held []byte) ([]byte, int64, error) {
	r := new(record)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, -1, err
	}
	h := new(record)
	if r.State != Ongoing || held != nil && json.Unmarshal(held, h) == nil &&
		h.State == Ongoing && h.ProducerID == r.ProducerID && h.Epoch == r.Epoch && h.StartMs == r.StartMs {
		return v, r.ProducerID, nil
	}
	r.State, r.Epoch = PrepareAbort, bumpable(r.Epoch)
	out, err := json.Marshal(r)
	return out, r.ProducerID, err
}

// Start completes the transactions a crash left prepared and starts the loop that aborts
// timed-out transactions; Close stops it.
func (c *Coordinator) Start() {
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		c.sweep()
		c.ExpireIDs(c.cfg.Now())
		lastExpiry := time.Now()
		tick := time.NewTicker(c.cfg.CheckInterval)
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tick.C:
				c.sweep()
				if time.Since(lastExpiry) >= c.cfg.IDExpirationCheckInterval {
					c.ExpireIDs(c.cfg.Now())
					lastExpiry = time.Now()
				}
			}
		}
	}()
}

// Close stops the timeout loop.
func (c *Coordinator) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.done.Wait()
}

// sweep completes prepared transactions and aborts timed-out ones.
func (c *Coordinator) sweep() {
	now := c.cfg.Now().UnixMilli()
	c.mu.RLock()
	var todo []*txn
	for _, t := range c.txns {
		r := t.rec
		if r == nil {
			continue
		}
		if r.State == PrepareCommit || r.State == PrepareAbort || r.State == Ongoing && now-r.StartMs > int64(r.TimeoutMs) {
			todo = append(todo, t)
		}
	}
	c.mu.RUnlock()
	for _, t := range todo {
		select {
		case <-c.stop:
			return
		default:
		}
		t.op.Lock()
		r := c.current(t)
		switch {
		case r.State == PrepareCommit || r.State == PrepareAbort:
			if err := c.complete(t, r); err != nil {
				c.log.Warn("txn: completing a transaction", "transactional_id", t.id, "err", err)
			}
		case r.State == Ongoing && now-r.StartMs > int64(r.TimeoutMs):
			// Kafka bumps the epoch of a timed-out transaction before aborting it, so the
			// producer that let it time out is fenced (TransactionCoordinator.abortTimedOutTransactions).
			c.log.Info("txn: aborting a timed-out transaction", "transactional_id", t.id, "producer_id", r.ProducerID, "epoch", r.Epoch)
			n := r.clone()
			n.Epoch = bumpable(n.Epoch)
			if code := c.endLocked(t, n, false); code != wire.ErrNone {
				c.log.Warn("txn: aborting a timed-out transaction", "transactional_id", t.id, "code", code)
			} else {
				c.timeouts.Add(1)
			}
		}
		t.op.Unlock()
	}
}

// current returns t's record; the caller holds t.op, so it cannot change meanwhile.
func (c *Coordinator) current(t *txn) *record {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return t.rec
}

// save makes r durable and publishes it as t's state.
func (c *Coordinator) save(t *txn, r *record) error {
	r.UpdateMs = c.cfg.Now().UnixMilli()
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := c.cfg.Store.SaveTxn(t.id, v); err != nil {
		return err
	}
	c.mu.Lock()
	c.indexPending(t, t.rec, r)
	t.rec = r
	c.mu.Unlock()
	return nil
}

// indexPending moves t's entries in c.pending from what old holds to what r holds; c.mu is
// held (or c not yet shared).
func (c *Coordinator) indexPending(t *txn, old, r *record) {
	if old != nil {
		for g := range old.Offsets {
			if r.Offsets[g] == nil {
				delete(c.pending[g], t)
				if len(c.pending[g]) == 0 {
					delete(c.pending, g)
				}
			}
		}
	}
	for g := range r.Offsets {
		if c.pending[g] == nil {
			c.pending[g] = map[*txn]bool{}
		}
		c.pending[g][t] = true
	}
}

func (c *Coordinator) get(id string, create bool) *txn {
	c.mu.RLock()
	t := c.txns[id]
	c.mu.RUnlock()
	if t != nil || !create {
		return t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t = c.txns[id]; t == nil {
		t = &txn{id: id}
		c.txns[id] = t
	}
	return t
}

// lock returns the id's txn with its op lock held (nil when it does not exist and create is
// not set): one that expired while the caller waited for op is looked up again.
func (c *Coordinator) lock(id string, create bool) *txn {
	for {
		t := c.get(id, create)
		if t == nil {
			return nil
		}
		t.op.Lock()
		if !t.gone {
			return t
		}
		t.op.Unlock()
	}
}

// InitProducerID handles InitProducerId with a transactional id
// (TransactionCoordinator.handleInitProducerId): a new id gets a producer id at epoch 0; an
// existing one gets its epoch bumped, fencing the previous producer, after its open
// transaction, if any, is aborted. producerID and epoch are v3+'s (KIP-360): -1, or the
// caller's current ones. Past epoch 32766 a new producer id starts again at epoch 0.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, producerID int64, epoch int16) (int64, int16, int16) {
	if !wire.ValidName(id) {
		// Kafka cannot read a longer string; a name that is not UTF-8 would not survive its
		// record.
		return -1, -1, wire.ErrInvalidRequest
	}
	if timeoutMs <= 0 || int64(timeoutMs) > c.cfg.MaxTimeout.Milliseconds() {
		return -1, -1, wire.ErrInvalidTransactionTimeout
	}
	t := c.lock(id, true)
	defer t.op.Unlock()
	r := c.current(t)
	if r == nil {
		pid, err := c.cfg.Store.AllocateProducerID()
		if err != nil {
			c.log.Error("txn: allocate producer id", "err", err)
			return -1, -1, wire.ErrCoordinatorNotAvailable
		}
		n := &record{ProducerID: pid, Epoch: 0, LastProducerID: -1, LastEpoch: -1, TimeoutMs: timeoutMs, State: Empty, StartMs: -1}
		if err := c.save(t, n); err != nil {
			c.log.Error("txn: save", "transactional_id", id, "err", err)
			return -1, -1, wire.ErrCoordinatorNotAvailable
		}
		return n.ProducerID, n.Epoch, wire.ErrNone
	}
	if producerID >= 0 {
		switch {
		case producerID == r.ProducerID && epoch == r.Epoch:
		case producerID == r.LastProducerID && epoch == r.LastEpoch && (r.State == Empty || r.State == CompleteCommit || r.State == CompleteAbort):
			// A retry of the InitProducerId that produced the current id and epoch.
			return r.ProducerID, r.Epoch, wire.ErrNone
		default:
			return -1, -1, wire.ErrProducerFenced
		}
	}
	prevPID, prevEpoch := r.ProducerID, r.Epoch // what a KIP-360 retry of this call names
	switch r.State {
	case PrepareCommit, PrepareAbort:
		// Only while a completion is being retried (after a crash or a failed marker write).
		return -1, -1, wire.ErrConcurrentTransactions
	case Ongoing:
		// Abort the open transaction at a bumped epoch, which fences its producer's
		// in-flight batches, then bump once more below for the new producer.
		n := r.clone()
		n.Epoch = bumpable(n.Epoch)
		if code := c.endLocked(t, n, false); code != wire.ErrNone {
			return -1, -1, code
		}
		c.aborts.Add(1)
		r = c.current(t)
		if r.State != CompleteAbort {
			return -1, -1, wire.ErrConcurrentTransactions
		}
	}
	n := r.clone()
	n.LastProducerID, n.LastEpoch = prevPID, prevEpoch
	if r.Epoch >= math.MaxInt16-1 {
		pid, err := c.cfg.Store.AllocateProducerID()
		if err != nil {
			c.log.Error("txn: allocate producer id", "err", err)
			return -1, -1, wire.ErrCoordinatorNotAvailable
		}
		n.ProducerID, n.Epoch = pid, 0
	} else {
		n.Epoch++
	}
	n.TimeoutMs, n.State, n.StartMs = timeoutMs, Empty, -1
	n.Partitions, n.Groups, n.Offsets = nil, nil, nil
	if err := c.save(t, n); err != nil {
		c.log.Error("txn: save", "transactional_id", id, "err", err)
		return -1, -1, wire.ErrCoordinatorNotAvailable
	}
	return n.ProducerID, n.Epoch, wire.ErrNone
}

// bumpable returns epoch+1, or epoch when that would leave no room for the producer's own
// bump after it (the next InitProducerId then moves to a new producer id).
func bumpable(epoch int16) int16 {
	if epoch >= math.MaxInt16-1 {
		return epoch
	}
	return epoch + 1
}

// validate is the check every operation of a producer makes against its transactional id.
func (c *Coordinator) validate(t *txn, producerID int64, epoch int16) (*record, int16) {
	if t == nil {
		return nil, wire.ErrInvalidProducerIDMapping
	}
	r := c.current(t)
	switch {
	case r == nil || r.ProducerID != producerID:
		return nil, wire.ErrInvalidProducerIDMapping
	case r.Epoch != epoch:
		return nil, wire.ErrProducerFenced
	case r.State == PrepareCommit || r.State == PrepareAbort:
		return nil, wire.ErrConcurrentTransactions
	}
	return r, wire.ErrNone
}

// operate runs fn on the transactional id's record, under its op lock, once the producer is
// known to be its current one (validate).
func (c *Coordinator) operate(id string, producerID int64, epoch int16, fn func(t *txn, r *record) int16) int16 {
	t := c.lock(id, false)
	if t == nil {
		return wire.ErrInvalidProducerIDMapping
	}
	defer t.op.Unlock()
	r, code := c.validate(t, producerID, epoch)
	if code != wire.ErrNone {
		return code
	}
	return fn(t, r)
}

// begin returns a copy of r made Ongoing.
func (c *Coordinator) begin(r *record) *record {
	n := r.clone()
	if n.State != Ongoing {
		n.State, n.StartMs = Ongoing, c.cfg.Now().UnixMilli()
		n.Partitions, n.Groups, n.Offsets = nil, nil, nil
	}
	return n
}

// AddPartitions handles AddPartitionsToTxn: the partitions join the transaction, which
// becomes Ongoing. The caller has already refused unknown partitions.
func (c *Coordinator) AddPartitions(id string, producerID int64, epoch int16, parts []TopicPartition) int16 {
	return c.operate(id, producerID, epoch, func(t *txn, r *record) int16 {
		if r.State == Ongoing && !slices.ContainsFunc(parts, func(tp TopicPartition) bool { return !r.hasPartition(tp) }) {
			return wire.ErrNone // all added already
		}
		n := c.begin(r)
		for _, tp := range parts {
			if !n.hasPartition(tp) {
				n.Partitions = append(n.Partitions, tp)
			}
		}
		return c.saveOr(t, n)
	})
}

// AddGroup handles AddOffsetsToTxn: the group's offsets may be committed in the transaction.
func (c *Coordinator) AddGroup(id string, producerID int64, epoch int16, group string) int16 {
	if !wire.ValidName(group) {
		return wire.ErrInvalidGroupID
	}
	return c.operate(id, producerID, epoch, func(t *txn, r *record) int16 {
		if r.State == Ongoing && slices.Contains(r.Groups, group) {
			return wire.ErrNone
		}
		n := c.begin(r)
		n.Groups = append(n.Groups, group)
		return c.saveOr(t, n)
	})
}

// CommitOffsets handles TxnOffsetCommit's transactional side: the offsets are kept with the
// transaction, durably, and applied to the group if it commits. The group must have been
// added (AddOffsetsToTxn) in this transaction.
func (c *Coordinator) CommitOffsets(id string, producerID int64, epoch int16, group string, offsets []PendingOffset) int16 {
	if !wire.ValidName(group) {
		return wire.ErrInvalidGroupID
	}
	for _, o := range offsets {
		if !utf8.ValidString(o.Metadata) {
			// The record is JSON, which would not give these bytes back.
			return wire.ErrInvalidRequest
		}
	}
	code := c.operate(id, producerID, epoch, func(t *txn, r *record) int16 {
		if r.State != Ongoing || !slices.Contains(r.Groups, group) {
			return wire.ErrInvalidTxnState
		}
		n := r.clone()
		if n.Offsets == nil {
			n.Offsets = map[string][]PendingOffset{}
		}
		now := c.cfg.Now().UnixNano()
		for _, o := range offsets {
			o.At = now
			list := n.Offsets[group]
			if i := slices.IndexFunc(list, func(p PendingOffset) bool { return p.Topic == o.Topic && p.Partition == o.Partition }); i >= 0 {
				list[i] = o
			} else {
				list = append(list, o)
			}
			n.Offsets[group] = list
		}
		return c.saveOr(t, n)
	})
	if code == wire.ErrProducerFenced {
		return wire.ErrInvalidProducerEpoch // the group coordinator's answer (GroupMetadata)
	}
	return code
}

func (c *Coordinator) saveOr(t *txn, n *record) int16 {
	if err := c.save(t, n); err != nil {
		c.log.Error("txn: save", "transactional_id", t.id, "err", err)
		return wire.ErrCoordinatorNotAvailable
	}
	return wire.ErrNone
}

// EndTxn handles EndTxn: commit or abort the open transaction. A retry of an end that
// completed is answered as it was; the other end after it, or an end with nothing open, is
// INVALID_TXN_STATE.
func (c *Coordinator) EndTxn(id string, producerID int64, epoch int16, commit bool) int16 {
	return c.operate(id, producerID, epoch, func(t *txn, r *record) int16 {
		switch r.State {
		case CompleteCommit:
			if commit {
				return wire.ErrNone
			}
			return wire.ErrInvalidTxnState
		case CompleteAbort:
			if !commit {
				return wire.ErrNone
			}
			return wire.ErrInvalidTxnState
		case Empty:
			return wire.ErrInvalidTxnState
		}
		code := c.endLocked(t, r.clone(), commit)
		switch {
		case code != wire.ErrNone:
		case commit:
			c.commits.Add(1)
		default:
			c.aborts.Add(1)
		}
		return code
	})
}

// endLocked ends the Ongoing transaction n (a copy of t's record, its epoch possibly bumped):
// Prepare* durably, then the completion. Once Prepare* is saved the outcome is decided and
// the answer is NONE even if the completion must be retried later (as Kafka answers EndTxn
// once PrepareCommit is written).
func (c *Coordinator) endLocked(t *txn, n *record, commit bool) int16 {
	n.State = PrepareAbort
	if commit {
		n.State = PrepareCommit
	}
	if err := c.save(t, n); err != nil {
		c.log.Error("txn: save", "transactional_id", t.id, "err", err)
		return wire.ErrCoordinatorNotAvailable
	}
	if err := c.complete(t, n); err != nil {
		c.log.Warn("txn: completion failed; retried in the background", "transactional_id", t.id, "err", err)
	}
	return wire.ErrNone
}

// complete writes a prepared transaction's markers, applies its offsets on a commit, and
// saves it Complete*.
func (c *Coordinator) complete(t *txn, r *record) error {
	commit := r.State == PrepareCommit
	kind := AbortMarker
	if commit {
		kind = CommitMarker
	}
	if len(r.Partitions) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.cfg.WriteMarkers(ctx, r.ProducerID, r.Epoch, kind, r.Partitions)
		cancel()
		if err != nil {
			return err
		}
	}
	if commit {
		groups := make([]string, 0, len(r.Offsets))
		for g := range r.Offsets {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			if err := c.cfg.CommitOffsets(g, r.Offsets[g]); err != nil {
				return err
			}
		}
	}
	n := r.clone()
	n.State = CompleteAbort
	if commit {
		n.State = CompleteCommit
	}
	n.Partitions, n.Groups, n.Offsets, n.StartMs = nil, nil, nil, -1
	return c.save(t, n)
}

// Verify reports whether a transactional batch may be written: the transactional id's
// producer is this one at this epoch, its transaction is Ongoing and added the partition
// (the log holds the coordinator as its batchlog.TxnVerifier, given at its Open).
func (c *Coordinator) Verify(id string, producerID int64, epoch int16, topic string, partition int32) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t := c.txns[id]
	if t == nil || t.rec == nil {
		return false
	}
	r := t.rec
	return r.ProducerID == producerID && r.Epoch == epoch && r.State == Ongoing && r.hasPartition(TopicPartition{topic, partition})
}

// PendingOffset reports whether an open transaction holds an offset of group for the
// partition not yet committed (OffsetFetch's RequireStable: UNSTABLE_OFFSET_COMMIT).
func (c *Coordinator) PendingOffset(group, topic string, partition int32) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for t := range c.pending[group] {
		for _, o := range t.rec.Offsets[group] {
			if o.Topic == topic && o.Partition == partition {
				return true
			}
		}
	}
	return false
}

// PendingGroup reports whether an open transaction holds offsets of group not yet committed:
// offset expiry keeps such a group.
func (c *Coordinator) PendingGroup(group string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pending[group]) > 0
}

// ExpireIDs forgets the transactional ids with no transaction open and no change for
// IDExpiration at now, deleting their records, and returns how many it forgot.
func (c *Coordinator) ExpireIDs(now time.Time) int {
	exp := c.cfg.IDExpiration
	if exp < 0 {
		return 0
	}
	cutoff := now.UnixMilli() - exp.Milliseconds()
	expired := func(r *record) bool {
		return r != nil && (r.State == Empty || r.State == CompleteCommit || r.State == CompleteAbort) && r.UpdateMs <= cutoff
	}
	c.mu.RLock()
	var todo []*txn
	for _, t := range c.txns {
		if expired(t.rec) {
			todo = append(todo, t)
		}
	}
	c.mu.RUnlock()
	n := 0
	for _, t := range todo {
		select {
		case <-c.stop:
			return n
		default:
		}
		t.op.Lock()
		if r := c.current(t); !t.gone && expired(r) {
			if err := c.cfg.Store.DeleteTxn(t.id); err != nil {
				c.log.Error("txn: delete expired transactional id", "transactional_id", t.id, "err", err)
			} else {
				c.mu.Lock()
				if c.txns[t.id] == t {
					delete(c.txns, t.id)
				}
				c.indexPending(t, r, &record{})
				t.gone = true
				c.mu.Unlock()
				n++
			}
		}
		t.op.Unlock()
	}
	if n > 0 {
		c.log.Info("txn: expired transactional ids (transactional.id.expiration.ms)", "ids", n)
	}
	return n
}

// quote names an id in a log line, cut after 256 bytes.
func quote(id string) string {
	if len(id) > 256 {
		return id[:256] + "...(" + strconv.Itoa(len(id)) + " bytes)"
	}
	return id
}

// Description is one transactional id as DescribeTransactions and ListTransactions show it.
type Description struct {
	ID         string
	ProducerID int64
	Epoch      int16
	State      State
	TimeoutMs  int32
	StartMs    int64
	Partitions []TopicPartition
}

func describe(id string, r *record) Description {
	return Description{ID: id, ProducerID: r.ProducerID, Epoch: r.Epoch, State: r.State, TimeoutMs: r.TimeoutMs,
		StartMs: r.StartMs, Partitions: slices.Clone(r.Partitions)}
}

// Describe returns one transactional id; ok is false for an id never initialised.
func (c *Coordinator) Describe(id string) (Description, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t := c.txns[id]
	if t == nil || t.rec == nil {
		return Description{}, false
	}
	return describe(id, t.rec), true
}

// List returns every transactional id, by id.
func (c *Coordinator) List() []Description {
	c.mu.RLock()
	out := make([]Description, 0, len(c.txns))
	for id, t := range c.txns {
		if t.rec != nil {
			out = append(out, describe(id, t.rec))
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
