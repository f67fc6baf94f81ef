package tier

import (
	"context"
	"fmt"
)

// The clean: the records of partitions whose topic is gone are deleted, then the bucket is
// listed and every object that no record names, every description of a topic that is gone and
// every description of a live topic but its newest, is deleted. What it finds are objects of
// an upload a crash cut short (written, never recorded), of a retention a crash cut short
// (record deleted, object not), and of deleted topics. It runs on the loop, never beside an upload, so an object being written is never
// taken for an orphan. The lease makes the prefix this node's alone; a key of a newer epoch
// than this node's (written by the node that took the prefix from it) is never deleted.

func (t *Tier) clean(ctx context.Context) error {
	live := map[uint32]bool{}
	liveTopics := map[string]bool{}
	for _, tp := range t.log.Topics() {
		liveTopics[fmt.Sprintf("%s/%x", tp.Name, tp.ID)] = true
		for _, p := range tp.Partitions {
			live[p.ID] = true
		}
	}
	recorded := map[string]bool{}
	t.mu.Lock()
	var gone []uint32
	for id, ps := range t.parts {
		if !live[id] {
			gone = append(gone, id)
			continue
		}
		ps.mu.RLock()
		for _, o := range ps.objects {
			recorded[o.Key] = true
		}
		ps.mu.RUnlock()
	}
	t.mu.Unlock()
	if !t.writable() {
		return errNotWriter
	}
	for _, id := range gone {
		for _, o := range t.objectsOf(id) {
			if err := t.meta.DeleteRemoteObject(o.Partition, o.Base); err != nil {
				return err
			}
			t.cache.forget(o.Key)
		}
		t.mu.Lock()
		delete(t.parts, id)
		t.mu.Unlock()
	}
	var orphans []string
	newest := map[string]string{} // a live topic's newest description
	own := t.epoch()
	lctx, cancel := t.callCtx(ctx)
	err := t.bucket.List(lctx, "", func(key string, _ int64) error {
		if recorded[key] {
			return nil
		}
		if k, ok := parseObjectKey(key); ok {
			if k.epoch <= own {
				orphans = append(orphans, key)
			}
			return nil
		}
		if dir, _, epoch, ok := parseDescriptionKey(key); ok {
			if epoch > own {
				return nil // the next writer's
			}
			if !liveTopics[dir] {
				orphans = append(orphans, key)
			} else if prev, ok := newest[dir]; !ok || newerDescription(key, prev) {
				if ok {
					orphans = append(orphans, prev)
				}
				newest[dir] = key
			} else {
				orphans = append(orphans, key)
			}
		}
		return nil
	})
	cancel()
	if err != nil {
		return err
	}
	for _, key := range orphans {
		cctx, cancel, err := t.writeCtx(ctx)
		if err != nil {
			return err
		}
		err = t.bucket.Delete(cctx, key)
		cancel()
		if err != nil {
			return err
		}
		t.stats.orphansDeleted.Add(1)
		t.cfg.Logger.Info("tier: deleted an object no record names", "key", key)
	}
	return nil
}
