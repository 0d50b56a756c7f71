package pgqueue

import (
	"encoding/json"
	"time"
)

// The JSON forms of Job, JobEntry, QueueStats and HorizonHolder: the names come from the struct
// tags, and the methods below change only what tags cannot say: durations are written as strings
// that time.ParseDuration reads ("1.5s"), and a JobEntry whose payload did not decode shows the
// stored payload and the error. Each wire struct embeds a method-free copy of the public type
// (jobFields, queueStatsFields, horizonHolderFields) and adds fields of the same JSON names,
// which, being less deeply nested, take their place.

// jsonDuration is a time.Duration that JSON shows as a duration string.
type jsonDuration time.Duration

// MarshalText returns the duration as time.Duration.String writes it.
func (d jsonDuration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration as time.ParseDuration does.
func (d *jsonDuration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return wrapf(err, "decode duration")
	}
	*d = jsonDuration(v)
	return nil
}

// jobFields is Job without its methods, for the wire structs to embed.
type jobFields[T any] Job[T]

// jobJSON is a Job as JSON shows it.
type jobJSON[T any] struct {
	*jobFields[T]
	RepeatEvery jsonDuration `json:"repeat_every,omitzero"`
}

func (j *Job[T]) wire() jobJSON[T] {
	return jobJSON[T]{jobFields: (*jobFields[T])(j), RepeatEvery: jsonDuration(j.RepeatEvery)}
}

// MarshalJSON writes the job as a JSON object (see Job).
func (j Job[T]) MarshalJSON() ([]byte, error) { return json.Marshal(j.wire()) }

// UnmarshalJSON reads a job written by MarshalJSON.
func (j *Job[T]) UnmarshalJSON(b []byte) error {
	w := j.wire()
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	j.RepeatEvery = time.Duration(w.RepeatEvery)
	return nil
}

// entryJSON is a JobEntry as JSON shows it. Payload holds T, or the stored JSON when it did not
// decode (and, when reading, a *json.RawMessage to read it into).
type entryJSON[T any] struct {
	jobJSON[T]
	Payload      any    `json:"payload"`
	Place        int    `json:"place"`
	PlaceAtLeast bool   `json:"place_at_least,omitempty"`
	PayloadError string `json:"payload_error,omitempty"`
}

// MarshalJSON writes the entry as a JSON object (see JobEntry).
func (e JobEntry[T]) MarshalJSON() ([]byte, error) {
	w := entryJSON[T]{jobJSON: e.wire(), Payload: e.Payload, Place: e.Place, PlaceAtLeast: e.PlaceAtLeast}
	if e.PayloadError != nil {
		w.Payload, w.PayloadError = e.RawPayload, e.PayloadError.Error()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads an entry written by MarshalJSON. RawPayload is the payload as written,
// and PayloadError is set when it does not decode into T.
func (e *JobEntry[T]) UnmarshalJSON(b []byte) error {
	var raw json.RawMessage
	w := entryJSON[T]{jobJSON: e.wire(), Payload: &raw}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e.RepeatEvery = time.Duration(w.RepeatEvery)
	e.Place, e.PlaceAtLeast, e.RawPayload, e.PayloadError = w.Place, w.PlaceAtLeast, raw, nil
	var zero T
	e.Payload = zero
	if len(raw) > 0 {
		e.PayloadError = decodePayload(e.ID, raw, &e.Payload)
	}
	return nil
}

// queueStatsFields is QueueStats without its methods, for queueStatsJSON to embed.
type queueStatsFields QueueStats

// queueStatsJSON is a QueueStats as JSON shows it.
type queueStatsJSON struct {
	*queueStatsFields
	OldestWait jsonDuration `json:"oldest_wait,omitzero"`
}

// MarshalJSON writes the stats as a JSON object (see QueueStats).
func (s QueueStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(queueStatsJSON{(*queueStatsFields)(&s), jsonDuration(s.OldestWait)})
}

// UnmarshalJSON reads stats written by MarshalJSON.
func (s *QueueStats) UnmarshalJSON(b []byte) error {
	w := queueStatsJSON{queueStatsFields: (*queueStatsFields)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	s.OldestWait = time.Duration(w.OldestWait)
	return nil
}

// horizonHolderFields is HorizonHolder without its methods, for horizonHolderJSON to embed.
type horizonHolderFields HorizonHolder

// horizonHolderJSON is a HorizonHolder as JSON shows it.
type horizonHolderJSON struct {
	*horizonHolderFields
	Age jsonDuration `json:"age,omitzero"`
}

// MarshalJSON writes the holder as a JSON object (see HorizonHolder).
func (h HorizonHolder) MarshalJSON() ([]byte, error) {
	return json.Marshal(horizonHolderJSON{(*horizonHolderFields)(&h), jsonDuration(h.Age)})
}

// UnmarshalJSON reads a holder written by MarshalJSON.
func (h *HorizonHolder) UnmarshalJSON(b []byte) error {
	w := horizonHolderJSON{horizonHolderFields: (*horizonHolderFields)(h)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	h.Age = time.Duration(w.Age)
	return nil
}
