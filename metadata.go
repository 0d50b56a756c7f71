package pgqueue

import (
	"encoding/json"
	"maps"

	"github.com/oklog/ulid/v2"
)

// Limits of a job's metadata (EnqueueOptions.Metadata): enough for a W3C trace context with
// baggage and a few ids of the application's own, small enough to travel with every claim.
const (
	// MaxMetadataKeyBytes is the longest key a job's metadata may have.
	MaxMetadataKeyBytes = 255
	// MaxMetadataBytes is the most a job's metadata may take encoded as a JSON object.
	MaxMetadataBytes = 16 << 10
)

// encodeMetadata checks m and encodes it as the JSON object the metadata column holds; nil for
// an empty m, which is stored as NULL.
func encodeMetadata(m map[string]string) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	for k, v := range m {
		switch {
		case k == "":
			return nil, invalidf("Metadata has an empty key")
		case len(k) > MaxMetadataKeyBytes:
			return nil, invalidf("Metadata key %.40q… is %d bytes long, more than %d", k, len(k), MaxMetadataKeyBytes)
		case !storableText(k):
			return nil, invalidf("Metadata key %q is not valid UTF-8 or contains U+0000", k)
		case !storableText(v):
			return nil, invalidf("Metadata value of %q is not valid UTF-8 or contains U+0000", k)
		}
	}
	doc, err := json.Marshal(m)
	if err != nil {
		return nil, invalidf("Metadata: %v", err)
	}
	if len(doc) > MaxMetadataBytes {
		return nil, invalidf("Metadata is %d bytes as JSON, more than %d", len(doc), MaxMetadataBytes)
	}
	return doc, nil
}

// decodeMetadata reads a metadata column into a map; nil for NULL. Metadata is never a reason
// to fail a job: values that are not strings (written by hand, not by pgqueue) come back as
// their JSON text, and a column that holds no JSON object reads as none.
func decodeMetadata(raw []byte) map[string]string {
	if len(raw) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || len(fields) == 0 {
		return nil
	}
	m := make(map[string]string, len(fields))
	for k, v := range fields {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			m[k] = s
		} else {
			m[k] = string(v)
		}
	}
	return m
}

// enqueueInfo describes an enqueue of the jobs ids to queue with opts for the client's enqueue
// middleware. Its Metadata is a map of the middleware's own, which it may add to, or, without
// middleware, the caller's map itself, which nothing then changes.
func (c *Client) enqueueInfo(queue string, ids []ulid.ULID, opts *EnqueueOptions, inTx bool) *EnqueueInfo {
	e := &EnqueueInfo{Queue: queue, IDs: ids, InTx: inTx}
	if opts != nil {
		e.Metadata = opts.Metadata
	}
	if len(c.cfg.EnqueueMiddleware) > 0 {
		m := make(map[string]string, len(e.Metadata)+2)
		maps.Copy(m, e.Metadata)
		e.Metadata = m
	}
	return e
}
