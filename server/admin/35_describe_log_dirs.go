package admin

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// DescribeLogDirs v0-v4 (KIP-113; v4 adds the directory's total and usable bytes, KIP-827).
// The node has one log directory, its data directory, and every partition lives in it; a
// partition's size is the bytes of the record batches it holds (batchlog.PartitionBytes),
// its offset lag 0 and it is never a future replica. A null topic list asks for every topic
// (LogDirsRequest). v5 (cordoned directories) is not advertised.
const describeLogDirsKey = 35

func init() {
	register(API{Key: describeLogDirsKey, Min: 0, Max: 4, Handle: handleDescribeLogDirs,
		Authz: before(authorizeDescribeLogDirs, onTopics(acl.Describe), onCluster(acl.Describe))})
}

func handleDescribeLogDirs(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.blog.Dir()
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	var st unix.Statfs_t
	if dir.Dir != "" && unix.Statfs(dir.Dir, &st) == nil {
		dir.TotalBytes = int64(st.Blocks) * st.Bsize
		dir.UsableBytes = int64(st.Bavail) * st.Bsize
	}
	type want struct {
		name  string
		parts []int32 // nil: all of the topic's partitions
	}
	var wants []want
	if req.Topics == nil {
		for _, t := range s.blog.Topics() {
			wants = append(wants, want{name: t.Name})
		}
	} else {
		for _, rt := range req.Topics {
			wants = append(wants, want{rt.Topic, rt.Partitions})
		}
	}
	for _, w := range wants {
		t, ok := s.blog.Topic(w.name)
		if !ok {
			continue // Kafka lists only the partitions it hosts
		}
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.Name
		parts := w.parts
		if parts == nil {
			for _, p := range t.Partitions {
				parts = append(parts, p.Index)
			}
		}
		for _, i := range parts {
			if i < 0 || int(i) >= len(t.Partitions) {
				continue
			}
			size, err := s.blog.PartitionBytes(t.Partitions[i])
			if err != nil {
				s.log.Error("describe log dirs", "topic", t.Name, "partition", i, "err", err)
				dir.ErrorCode = wire.ErrKafkaStorageError
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = i, size
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}

// authorizeDescribeLogDirs: the topics the principal may describe; the volume's sizes need
// DESCRIBE on the cluster (Kafka needs it for the whole request).
func authorizeDescribeLogDirs(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	// Kafka needs DESCRIBE on the cluster; here a principal sees its own topics' sizes,
	// and not the volume's total and usable bytes (KIP-827's -1, unknown): how they
	// move tells how much the other tenants write.
	if req.Topics != nil {
		req.Topics, _ = authz.SplitAllowed(req.Topics, func(t kmsg.DescribeLogDirsRequestTopic) bool { return p.Topic(acl.Describe, t.Topic) })
	}
	cluster := p.Cluster(acl.Describe)
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.DescribeLogDirsResponse)
		for i := range resp.Dirs {
			resp.Dirs[i].Topics, _ = authz.SplitAllowed(resp.Dirs[i].Topics, func(t kmsg.DescribeLogDirsResponseDirTopic) bool { return p.Topic(acl.Describe, t.Topic) })
			if !cluster {
				resp.Dirs[i].TotalBytes, resp.Dirs[i].UsableBytes = -1, -1
			}
		}
	}

	// Elections and reassignments act on the cluster (Kafka: ALTER or DESCRIBE on CLUSTER):
	// only a principal allowed every topic may use them.
}
