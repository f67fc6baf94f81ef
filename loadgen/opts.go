package loadgen

import "github.com/twmb/franz-go/pkg/kgo"

// ProducerOpts returns the kgo options Run gives producer index, defaults filled and the config
// checked: a harness that drives its own producers (bench's consume phase, whose record values
// carry a send time) gets the same client settings as a loadgen run.
func (c Config) ProducerOpts(index int) ([]kgo.Opt, error) {
	n, err := c.normalize()
	if err != nil {
		return nil, err
	}
	return n.producerOpts(index), nil
}
