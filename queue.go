package pgqueue

import "regexp"

// queueNamePattern is what a queue name may look like. Names reach SQL only as bind parameters
// and NOTIFY payloads, never as identifiers; the pattern keeps them readable in logs and psql.
var queueNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ValidateQueueName reports whether name may name a queue: 1 to 128 characters from ASCII
// letters, digits and "_.:-", starting with a letter or digit.
func ValidateQueueName(name string) error {
	if !queueNamePattern.MatchString(name) {
		return invalidf("queue name %q: want 1 to 128 of A-Z a-z 0-9 _ . : -, starting with a letter or digit", name)
	}
	return nil
}

// Queue is a named queue whose jobs carry payloads of type T, encoded as JSON. Several Queue
// values, in one process or many, may name the same queue; they share its jobs. A Queue is safe
// for concurrent use.
type Queue[T any] struct {
	c    *Client
	name string
}

// NewQueue returns the queue called name on client c. It validates the name and does no I/O.
func NewQueue[T any](c *Client, name string) (*Queue[T], error) {
	if c == nil {
		return nil, invalidf("NewQueue needs a client")
	}
	if err := ValidateQueueName(name); err != nil {
		return nil, err
	}
	return &Queue[T]{c: c, name: name}, nil
}

// Name returns the queue's name.
func (q *Queue[T]) Name() string { return q.name }
